#!/usr/bin/env bash
# Side-by-side load test of POST /v2/events: Endcap and a bare Gin handler that
# only reads the body and answers 200, in alternating rounds so that both see
# the same machine noise. Prints each round and the medians.
#
# Endcap: the one running at URL (`make run`), or with START=1 an `endcap dev`
# of this script's own (SERVER_BIN, data in a fresh DIR, every port from
# PORT_BASE; TARGET=api runs the API alone, nothing folding), stopped at the end.
# Settings via environment:
#   ROUNDS (3) DURATION (10s) CONCURRENCY (32) BATCH (50) URL (http://127.0.0.1:8080)
#   RATE (0 = closed loop, else requests/s) BARE_ADDR (127.0.0.1:18099) BARE (1; 0 = no bare rounds)
#   START (0) SERVER_BIN (BIN) TARGET (all) PORT_BASE (28080) DIR (.endcap/bench-events; removed first, and
#   at the end unless KEEP=1) API_ENV (NAME=value words for that endcap dev only) DEV_FLAGS
#   BIN (./bin/endcap: the generator, built when missing; REBUILD=1 builds it again)
#   SUMMARY (empty; a file to append the medians to as one JSON line, read by bench-compare.sh) LABEL
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=deploy/local/bench-lib.sh
. deploy/local/bench-lib.sh
ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-10s}" CONCURRENCY="${CONCURRENCY:-32}" BATCH="${BATCH:-50}"
URL="${URL:-http://127.0.0.1:8080}" RATE="${RATE:-0}" BARE_ADDR="${BARE_ADDR:-127.0.0.1:18099}" BARE="${BARE:-1}"
START="${START:-0}" TARGET="${TARGET:-all}" PORT_BASE="${PORT_BASE:-28080}" DIR="${DIR:-.endcap/bench-events}"
KEEP="${KEEP:-0}" API_ENV="${API_ENV:-}" DEV_FLAGS="${DEV_FLAGS:-}" SUMMARY="${SUMMARY:-}" LABEL="${LABEL:-tree}"
bin="${BIN:-./bin/endcap}"
if [ ! -x "$bin" ] || [ "${REBUILD:-0}" = 1 ]; then env -u GODEBUG go build -tags dev -o "$bin" ./cmd/endcap; fi
server="${SERVER_BIN:-$bin}"
creds=(--credentials .endcap/dev/credentials.json)

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	bench_dev_stop
	if [ "$START" = 1 ] && [ "$KEEP" != 1 ]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT
out=$(mktemp -d)
if [ "$START" = 1 ]; then
	rm -rf "$DIR"
	mkdir -p "$DIR"
	DIR=$(realpath "$DIR")
	echo "starting $server dev --target $TARGET on ports $PORT_BASE-$((PORT_BASE + 7)), data in $DIR (log: $out/dev.log)"
	# shellcheck disable=SC2086 # DEV_FLAGS is a list of flags
	BENCH_DEV_ENV="$API_ENV" bench_dev_start "$server" "$DIR" "$PORT_BASE" "$out/dev.log" --target "$TARGET" $DEV_FLAGS
	URL="$DEV_URL"
	creds=(--credentials "$DEV_CREDENTIALS")
fi
curl -fsS "$URL/readyz" >/dev/null || { echo "Endcap is not ready at $URL: start it with 'make run' first, or START=1" >&2; exit 1; }

targets=(endcap)
if [ "$BARE" = 1 ]; then
	"$bin" loadgen bare --addr "$BARE_ADDR" 2>/dev/null &
	pids+=($!)
	sleep 0.5
	targets+=(bare)
fi

for r in $(seq 1 "$ROUNDS"); do
	for target in "${targets[@]}"; do
		u="$URL"; [ "$target" = bare ] && u="http://$BARE_ADDR"
		"$bin" loadgen events --url "$u" "${creds[@]}" --duration "$DURATION" --concurrency "$CONCURRENCY" \
			--batch "$BATCH" --rate "$RATE" --json > "$out/$target-$r.json"
		python3 - "$target" "$r" "$out/$target-$r.json" <<'PY'
import json, sys
t, r, p = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(p))
print(f"round {r} {t:7s} events/s {d['events_per_sec']:>10.0f}  p50 {d['p50_ms']:7.2f} ms  p99 {d['p99_ms']:7.2f} ms  ok {d['ok']} failed {d['failed']}")
PY
	done
done
python3 - "$out" "$ROUNDS" "$LABEL" "$TARGET" "$RATE" "$SUMMARY" <<'PY'
import json, statistics, sys
out, rounds, label, target, rate, summary = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
med = {}
for t in ("endcap", "bare"):
    try:
        runs = [json.load(open(f"{out}/{t}-{r}.json")) for r in range(1, rounds + 1)]
    except FileNotFoundError:
        continue  # BARE=0
    med[t] = {k: statistics.median(x[k] for x in runs) for k in ("events_per_sec", "p50_ms", "p99_ms")}
    print(f"median  {t:7s} events/s {med[t]['events_per_sec']:>10.0f}  p50 {med[t]['p50_ms']:7.2f} ms  p99 {med[t]['p99_ms']:7.2f} ms")
res = {"label": label, "target": target, "rate": float(rate), **{f"{t}_{k}": v for t in med for k, v in med[t].items()}}
if "bare" in med:
    res["ratio_to_bare"] = med["endcap"]["events_per_sec"] / med["bare"]["events_per_sec"]
    print(f"endcap/bare throughput ratio {res['ratio_to_bare']:.2f}")
if summary:
    with open(summary, "a") as f:
        f.write(json.dumps(res) + "\n")
PY
