#!/usr/bin/env bash
# Fetches the console's front-end packages from npm at their pinned versions and copies their built files into
# api/console/static/vendor (committed: the Go build embeds them and needs no npm). Run it to change a version,
# then commit the files it wrote; the console serves nothing else from elsewhere.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
UPLOT_VERSION=1.6.32
dest=api/console/static/vendor
tmp="$(mktemp -d -t endcap-console-vendor.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
printf '{"name":"endcap-console-vendor","private":true}\n' >"$tmp/package.json"
npm install --prefix "$tmp" --no-audit --no-fund --no-update-notifier --save-exact "uplot@$UPLOT_VERSION" >/dev/null
mkdir -p "$dest"
cp "$tmp/node_modules/uplot/dist/uPlot.iife.min.js" "$tmp/node_modules/uplot/dist/uPlot.min.css" "$dest/"
cp "$tmp/node_modules/uplot/LICENSE" "$dest/uPlot.LICENSE"
echo "uplot $UPLOT_VERSION copied into $dest"
