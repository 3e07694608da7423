#!/usr/bin/env bash
# gen-proto.sh regenerates the Go code of gpuarena's protobuf messages
# (internal/nodepb/*.proto -> *.pb.go). Run it from anywhere after editing a
# .proto file and commit the generated files with it; building and testing
# need neither protoc nor this script.
#
# Needs protoc (Debian: apt-get install -y protobuf-compiler) and
# protoc-gen-go at the version of google.golang.org/protobuf in go.mod,
# which it installs into $(go env GOPATH)/bin when missing or different.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
command -v protoc >/dev/null || { echo "gen-proto.sh: protoc not found: apt-get install -y protobuf-compiler" >&2; exit 2; }
version="$(go list -m -f '{{.Version}}' google.golang.org/protobuf)"
gen="$(go env GOPATH)/bin/protoc-gen-go"
if ! [ -x "$gen" ] || [ "$("$gen" --version | awk '{print $2}')" != "$version" ]; then
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@$version"
fi
protoc --plugin=protoc-gen-go="$gen" -I internal/nodepb \
	--go_out=internal/nodepb --go_opt=paths=source_relative \
	internal/nodepb/*.proto
