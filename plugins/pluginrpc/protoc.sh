#!/usr/bin/env bash
# protoc.sh FILE.proto: regenerate FILE.pb.go and FILE_grpc.pb.go beside
# FILE.proto, in the current directory. Each plugin kind's *pb package runs it
# from a //go:generate line, so `make generate` (go generate ./...) rebuilds
# every plugin protocol the same way.
#
# Needs protoc (Debian package protobuf-compiler; the committed code was made
# with 3.21.12). The Go generators are pinned here and built into a temporary
# directory, so the output does not depend on what is on PATH:
# protoc-gen-go at the protobuf version go.mod requires, protoc-gen-go-grpc at
# the version below.
set -euo pipefail

PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

if [ $# -ne 1 ]; then
	echo "usage: $0 FILE.proto" >&2
	exit 2
fi
if ! command -v protoc >/dev/null; then
	echo "protoc.sh: protoc not found: install the Debian package protobuf-compiler" >&2
	exit 1
fi

tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
# protoc-gen-go comes from the protobuf module go.mod already pins.
go build -o "$tools/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
GOBIN=$tools go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

protoc \
	--plugin=protoc-gen-go="$tools/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$tools/protoc-gen-go-grpc" \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	"$1"
