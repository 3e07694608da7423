// Package nodepb holds the protobuf messages a gpuarena node's gateway
// takes and answers across hosts (node.proto), and their generated Go code
// (node.pb.go, written by scripts/gen-proto.sh with protoc-gen-go at the
// version of google.golang.org/protobuf in go.mod). protoactor-go's remote
// carries only protobuf messages, so everything that crosses a host is
// declared here; internal/node translates them to gpuarena's calls.
package nodepb
