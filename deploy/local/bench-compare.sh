#!/usr/bin/env bash
# Two builds side by side: the base commit BASE and the tree, under one of the HTTP benches, alternated run
# by run on fresh data directories so that both see the same machine (docs/design/performance.md, How the
# figures are made). Prints every run's figures, then per build the medians and the tree/base ratios.
#
#   BASE=0ee53bd deploy/local/bench-compare.sh                 # BENCH=overload
#   BASE=0ee53bd BENCH=events RATE=0 deploy/local/bench-compare.sh
#   BASE=0ee53bd BENCH=auctions MODES=open deploy/local/bench-compare.sh
#
# The base's development binary is built in a temporary worktree (`git worktree add`, `go build -tags dev`)
# into bin/endcap-<commit>, kept for the next comparison. The load generator is always the tree's
# (./bin/endcap): the client is the same, only the server differs. Where the base lacks a flag or a setting a
# bench uses, the script says so and runs without it (a setting in API_ENV the base does not know is
# ignored by it), or skips the bench when it cannot run.
#
# Pair p runs the tree then the base when p is odd, the base then the tree when it is even. Each run is the
# bench script with ROUNDS=1 (BENCH=events, auctions) on its own fresh stack:
#   overload  deploy/local/bench-overload.sh; when RATE is not given, the first run (the tree's) finds R and
#             every later run, of either build, is offered that same R
#   events    deploy/local/bench-events.sh START=1 BARE=0 (closed loop unless RATE; TARGET=api: the API alone)
#   auctions  deploy/local/bench-auctions.sh BARE=0: each build first seeds a stack of its own once (SEED_* as
#             that script's; minutes at the defaults), which every run of that build starts from (SNAPSHOT)
# Settings via environment: BASE (required) BENCH (overload) ROUNDS (3 pairs) PORT_BASE (28080) WORK
# (.endcap/bench-compare: the runs' data, removed at the end unless KEEP=1); every other setting goes to the
# bench script (DURATION, RATE, TARGET, API_ENV...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=deploy/local/bench-lib.sh
. deploy/local/bench-lib.sh
BENCH="${BENCH:-overload}" ROUNDS="${ROUNDS:-3}" PORT_BASE="${PORT_BASE:-28080}" WORK="${WORK:-.endcap/bench-compare}" KEEP="${KEEP:-0}"
[ -n "${BASE:-}" ] || { echo "BASE=<commit> is required" >&2; exit 1; }
base_sha=$(git rev-parse --verify "$BASE^{commit}")
case "$BENCH" in overload | events | auctions) ;; *) echo "BENCH must be overload, events or auctions" >&2; exit 1 ;; esac

mkdir -p bin
tree_bin="$PWD/bin/endcap"
base_bin="$PWD/bin/endcap-${base_sha:0:12}"
echo "building the tree into $tree_bin"
env -u GODEBUG go build -tags dev -o "$tree_bin" ./cmd/endcap
echo "building $BASE (${base_sha:0:12}) into $base_bin"
bench_build_commit "$base_sha" "$base_bin"

# What the base lacks of what the bench uses of the server.
for f in dir http-addr kafka-brokers clickhouse-addr clickhouse-http-port redis-addr s3-endpoint mail-smtp-port mail-web-port target; do
	if ! bench_has_flag "$f" "$base_bin" dev; then
		echo "the base's endcap dev has no --$f, which the benches need to start a stack of their own: nothing to compare" >&2
		exit 1
	fi
done
bench_has_flag demo-traffic "$base_bin" dev || echo "note: the base's endcap dev has no --demo-traffic (it writes no demo traffic)"
for kv in ${API_ENV:-}; do
	name=${kv%%=*}
	flag=$(echo "${name#ENDCAP_}" | tr 'A-Z_' 'a-z-')
	if [[ "$name" == ENDCAP_* ]] && ! bench_has_flag "$flag" "$base_bin" dev; then
		echo "note: the base has no setting $name (--$flag): its runs go without it"
	fi
done
if [ "$BENCH" = auctions ] && [ "${SPLIT:-0}" = 1 ]; then
	echo "BENCH=auctions with SPLIT=1 is not supported here (its processes use the default ports)" >&2
	exit 1
fi

rm -rf "$WORK"
mkdir -p "$WORK"
WORK=$(realpath "$WORK")
trap '[ "$KEEP" = 1 ] || rm -rf "$WORK"' EXIT
summary="$WORK/summary.jsonl"

run_one() { # label binary
	local label=$1 server=$2
	echo "== $BENCH, $label ($server)"
	case "$BENCH" in
	overload)
		SERVER_BIN="$server" BIN="$tree_bin" NOBUILD=1 LABEL="$label" SUMMARY="$summary" PORT_BASE="$PORT_BASE" \
			DIR="$WORK/stack" deploy/local/bench-overload.sh
		if [ -z "${RATE:-}" ]; then
			RATE=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["rate"])' "$summary")
			export RATE
			echo "every later run is offered R = $RATE requests/s"
		fi
		;;
	events)
		SERVER_BIN="$server" BIN="$tree_bin" START=1 BARE=0 ROUNDS=1 LABEL="$label" SUMMARY="$summary" \
			PORT_BASE="$PORT_BASE" DIR="$WORK/stack" deploy/local/bench-events.sh
		;;
	auctions)
		local snap="$WORK/seeded-$label"
		if [ ! -d "$snap" ]; then
			echo "seeding a stack for $label (once)"
			SERVER_BIN="$server" BIN="$tree_bin" NOBUILD=1 PORT_BASE="$PORT_BASE" ENDCAP_DEV_DIR="$snap" \
				MODES="" BARE=0 deploy/local/bench-auctions.sh
		fi
		SERVER_BIN="$server" BIN="$tree_bin" NOBUILD=1 PORT_BASE="$PORT_BASE" ENDCAP_DEV_DIR="$WORK/stack" \
			SNAPSHOT="$snap" BARE=0 ROUNDS=1 LABEL="$label" SUMMARY="$summary" deploy/local/bench-auctions.sh
		;;
	esac
}

for p in $(seq 1 "$ROUNDS"); do
	if [ $((p % 2)) = 1 ]; then order=(tree base); else order=(base tree); fi
	for label in "${order[@]}"; do
		if [ "$label" = tree ]; then run_one tree "$tree_bin"; else run_one base "$base_bin"; fi
	done
done

python3 - "$summary" "${base_sha:0:12}" <<'PY'
import json, statistics, sys
runs = {"base": [], "tree": []}
def flat(d, pre=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, f"{pre}{k}.")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield pre + k, float(v)
for line in open(sys.argv[1]):
    d = json.loads(line)
    runs[d["label"]].append(dict(flat(d)))
keys = sorted(set(runs["base"][0]) | set(runs["tree"][0]))
print(f"medians of {len(runs['tree'])} runs each (base = {sys.argv[2]}):")
print(f"{'figure':36s} {'base':>12s} {'tree':>12s} {'tree/base':>10s}")
for k in keys:
    m = {}
    for b in ("base", "tree"):
        vs = [r[k] for r in runs[b] if k in r]
        m[b] = statistics.median(vs) if vs else None
    fmt = lambda v: "-" if v is None else f"{v:12.2f}"
    ratio = f"{m['tree'] / m['base']:10.2f}" if m["base"] and m["tree"] is not None else f"{'-':>10s}"
    print(f"{k:36s} {fmt(m['base'])} {fmt(m['tree'])} {ratio}")
PY
