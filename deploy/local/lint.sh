#!/usr/bin/env bash
# make lint: golangci-lint (the version pinned in tools/lint/go.mod, built into .endcap/lint/ on first use) with
# the project's .golangci.yml: go vet, staticcheck, errcheck, unused, ineffassign, misspell, and depguard's rules
# for the direction of imports (cmd → app → api → domain → storage).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="/usr/local/go/bin:$PATH"
version=$(awk '$1 == "github.com/golangci/golangci-lint/v2" {print $2}' tools/lint/go.mod)
bin=.endcap/lint/golangci-lint-$version
if [ ! -x "$bin" ]; then
	echo "building golangci-lint $version into $bin (once; about a minute and a half)"
	mkdir -p .endcap/lint
	(cd tools/lint && GOWORK=off go build -o "../../$bin.tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
	mv "$bin.tmp" "$bin"
fi
exec "$bin" run "$@" ./...
