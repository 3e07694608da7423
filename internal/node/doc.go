// Package node makes a host's devices one member of a gpuarena cluster
// over protoactor-go's remote and cluster packages: Start joins the
// cluster (membership from a Provider: Automanaged and Static need no
// outside service; Static binds nothing but the remote), publishes the
// node's inventory through the cluster's gossip (InventoryKey) on every
// change and every period, registers the placement grain kind
// (PlacementKind), and spawns the gateway actor (GatewayName) that takes
// the nodepb messages — inventory, cluster inventory, memory info,
// preflight, reserve, build, load, renew, release, ledger, placement — and
// translates them into calls of the
// devices' gpuarena managers. A placement is not computed in the gateway:
// a placement call asks a placement grain (cluster.Request), which the
// cluster activates on some node and which answers with Place
// (arena.FitRanks per device) over its node's gossiped inventories, with
// every serving option of arena.Options and arena.FitOptions
// (PlaceRequestFor). Client asks a node's gateway from any actor system
// with a remote; RemoteConfig and Credentials put nodes and clients on
// (mutual) TLS.
//
// A reservation is idempotent and leased: its key names it (a repeated
// reserve with the same arguments returns the same reservation and renews
// it), its memory is one Manager.Alloc under the ledger owner
// ReservationOwnerPrefix + key, and a lease not renewed within its TTL is
// freed by the node. The node's ledger is the truth; a reserve that does
// not fit is refused with ERROR_CODE_OUT_OF_MEMORY, which a Client returns
// as a *RemoteError matching gpuarena.ErrOutOfMemory.
//
// A deployment is keyed and leased the same way: a BuildRequest builds one
// pipeline stage's arenas (arena.PlanRanks, Manager.BuildArena) on devices
// that hold nothing else, a LoadRequest loads each device's weight shard
// (Manager.LoadWeightsRank), each all or nothing, and a release or a
// lapsed lease calls Manager.Release and then Manager.Reset on its
// devices, which take the next deployment (a device whose release failed
// part-way is refused, ERROR_CODE_DEVICE_IN_USE, until it is released
// again).
package node
