#!/usr/bin/env bash
# Side-by-side load test of POST /v2/events: the running Endcap (`make run`)
# and a bare Gin handler that only reads the body and answers 200, in
# alternating rounds so that both see the same machine noise. Prints each
# round and the medians. Settings via environment:
#   ROUNDS (3) DURATION (10s) CONCURRENCY (32) BATCH (50) URL (http://127.0.0.1:8080)
#   RATE (0 = closed loop, else requests/s)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-10s}" CONCURRENCY="${CONCURRENCY:-32}" BATCH="${BATCH:-50}"
URL="${URL:-http://127.0.0.1:8080}" RATE="${RATE:-0}" BARE_ADDR="${BARE_ADDR:-127.0.0.1:18099}"
bin=./bin/endcap
[ -x "$bin" ] || env -u GODEBUG go build -tags dev -o "$bin" ./cmd/endcap
curl -fsS "$URL/readyz" >/dev/null || { echo "Endcap is not ready at $URL: start it with 'make run' first" >&2; exit 1; }

"$bin" loadgen bare --addr "$BARE_ADDR" 2>/dev/null &
bare_pid=$!
trap 'kill "$bare_pid" 2>/dev/null || true' EXIT
sleep 0.5

out=$(mktemp -d)
for r in $(seq 1 "$ROUNDS"); do
	for target in endcap bare; do
		u="$URL"; [ "$target" = bare ] && u="http://$BARE_ADDR"
		"$bin" loadgen events --url "$u" --duration "$DURATION" --concurrency "$CONCURRENCY" \
			--batch "$BATCH" --rate "$RATE" --json > "$out/$target-$r.json"
		python3 - "$target" "$r" "$out/$target-$r.json" <<'PY'
import json, sys
t, r, p = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(p))
print(f"round {r} {t:7s} events/s {d['events_per_sec']:>10.0f}  p50 {d['p50_ms']:7.2f} ms  p99 {d['p99_ms']:7.2f} ms  ok {d['ok']} failed {d['failed']}")
PY
	done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
med = {}
for t in ("endcap", "bare"):
    runs = [json.load(open(f"{out}/{t}-{r}.json")) for r in range(1, rounds + 1)]
    med[t] = {k: statistics.median(x[k] for x in runs) for k in ("events_per_sec", "p50_ms", "p99_ms")}
    print(f"median  {t:7s} events/s {med[t]['events_per_sec']:>10.0f}  p50 {med[t]['p50_ms']:7.2f} ms  p99 {med[t]['p99_ms']:7.2f} ms")
print(f"endcap/bare throughput ratio {med['endcap']['events_per_sec'] / med['bare']['events_per_sec']:.2f}")
PY
