package node

import "testing"

func TestRaceReportsSortsByInnermostFrame(t *testing.T) {
	const upstreamReport = `WARNING: DATA RACE
Write at 0x00c000198a78 by goroutine 75:
  github.com/asynkron/protoactor-go/cluster.setKey()
      /x/cluster/informer.go:1 +0x1
  github.com/gpuarena/gpuarena/internal/node.(*Node).Close()
      /x/node.go:1 +0x1

Previous read at 0x00c000198a78 by goroutine 80:
  github.com/asynkron/protoactor-go/cluster.getKey()
      /x/cluster/informer.go:2 +0x1
`
	const ourReport = `WARNING: DATA RACE
Read at 0x00c0001066a8 by goroutine 80:
  github.com/asynkron/protoactor-go/remote.(*BlockList).BlockedMembers()
      /x/blocklist.go:1 +0x1

Previous write at 0x00c0001066a8 by goroutine 88:
  github.com/gpuarena/gpuarena/internal/node.(*gateway).reserve()
      /x/gateway.go:1 +0x1
`
	stderr := "log line\n==================\n" + upstreamReport + "==================\nmore logs\n==================\n" + ourReport + "==================\n"
	ours, upstream := raceReports(stderr)
	if len(ours) != 1 || len(upstream) != 1 {
		t.Fatalf("got %d ours, %d upstream; want 1 and 1", len(ours), len(upstream))
	}
	if ours[0] != "\n"+ourReport {
		t.Fatalf("ours = %q", ours[0])
	}
}
