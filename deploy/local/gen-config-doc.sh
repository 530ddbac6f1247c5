#!/usr/bin/env bash
# Regenerates the configuration table at the end of docs/operations/operations.md from the code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
doc=docs/operations/operations.md
head=$(sed '/^| flag | variable | default | meaning |$/,$d' "$doc")
{ printf '%s\n' "$head"; echo '| flag | variable | default | meaning |'; echo '|---|---|---|---|'; go run ./cmd/endcap config --markdown; } > "$doc.tmp"
mv "$doc.tmp" "$doc"
