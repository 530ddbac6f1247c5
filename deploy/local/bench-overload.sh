#!/usr/bin/env bash
# POST /v2/events at 5× its sustainable rate (docs/design/performance.md, Events API over HTTP, Overload):
# does the API shed what it cannot take (503 + Retry-After at once) and keep the latency of what it accepts?
#
# It starts its own `endcap dev` (SERVER_BIN, data in a fresh DIR, every port from PORT_BASE: never the
# defaults of `make run`), then:
#   1. the rate R: RATE when given, else RATE_SHARE × the requests/s of a closed-loop round of FIND at
#      CONCURRENCY connections;
#   2. normal: the "victim" generator, open loop at R requests/s (× BATCH events) for DURATION;
#   3. overload: the same victim at R, while another generator offers FACTOR × R at OVER_CONCURRENCY
#      connections (from 1 s before the victim's window to 1 s after it): FACTOR + 1 times R offered in all;
#   4. stored: waits until the fold has written every accepted event to ClickHouse (the count of the run's
#      events stops moving, at most DRAIN_TIMEOUT s), then counts, for each phase and generator, the events
#      stored of the requests answered 503, answered otherwise, or not answered.
# It prints, per phase and generator: the answers 200 / 503 / 429 / other errors (transport errors and other
# statuses) / unsent (open-loop sends due that no free connection could make); the victim's p50 and p99 of
# its 200 answers (from each request's scheduled send time) and the ratio of the overload p99 to the
# normal p99; the API process's peak RSS in each phase (VmHWM, reset at the phase's start); the events
# stored of the requests answered 503.
#
# How the events of a request are found: every event id of a run starts with a prefix of the run and phase
# (`loadgen events --id-prefix`), and its first 34 characters are its request's key; the generator writes the
# key and status of every request not answered 200 (`--failures`). ClickHouse's `events` view is grouped by
# key and matched with those files. A request cut off by the end of a run (unanswered) is counted apart.
#
# Settings via environment:
#   DURATION (20s) RATE (empty: found) FIND (5s) RATE_SHARE (0.5) FACTOR (5) BATCH (50)
#   CONCURRENCY (64: the victim's and the finding round's connections) OVER_CONCURRENCY (1024) TIMEOUT (5s)
#   PORT_BASE (28080; 8 ports from it) DIR (.endcap/bench-overload; removed first, and at the end unless KEEP=1)
#   BIN (./bin/endcap, built from the tree: the generator) SERVER_BIN (BIN: the build measured; another
#   commit's with deploy/local/bench-compare.sh) NOBUILD (0; 1 = BIN is built already)
#   TARGET (all: every target in one process, as `make run`; api: `endcap dev --target api`, the API alone,
#   nothing folds the events, so the stored events are not counted)
#   API_ENV (NAME=value words for the endcap dev process only, e.g. ENDCAP_MAX_EVENTS_IN_FLIGHT=128)
#   DEV_FLAGS (more flags of endcap dev) DRAIN_TIMEOUT (180 s)
#   SUMMARY (empty; a file to append the run's figures to as one JSON line, read by bench-compare.sh) LABEL
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=deploy/local/bench-lib.sh
. deploy/local/bench-lib.sh
DURATION="${DURATION:-20s}" RATE="${RATE:-}" FIND="${FIND:-5s}" RATE_SHARE="${RATE_SHARE:-0.5}" FACTOR="${FACTOR:-5}"
BATCH="${BATCH:-50}" CONCURRENCY="${CONCURRENCY:-64}" OVER_CONCURRENCY="${OVER_CONCURRENCY:-1024}" TIMEOUT="${TIMEOUT:-5s}"
PORT_BASE="${PORT_BASE:-28080}" DIR="${DIR:-.endcap/bench-overload}" KEEP="${KEEP:-0}" NOBUILD="${NOBUILD:-0}"
TARGET="${TARGET:-all}" API_ENV="${API_ENV:-}" DEV_FLAGS="${DEV_FLAGS:-}" DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-180}"
SUMMARY="${SUMMARY:-}" LABEL="${LABEL:-tree}"
bin="${BIN:-./bin/endcap}"
[ "$NOBUILD" = 1 ] || env -u GODEBUG go build -tags dev -o "$bin" ./cmd/endcap
server="${SERVER_BIN:-$bin}"
case "$TARGET" in all | api) ;; *) echo "TARGET must be all or api" >&2; exit 1 ;; esac

out=$(mktemp -d)
echo "reports: $out"
cleanup() {
	bench_dev_stop
	if [ "$KEEP" != 1 ]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT
rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
log="$out/dev.log"
echo "starting $server dev --target $TARGET on ports $PORT_BASE-$((PORT_BASE + 7)), data in $DIR (log: $log)"
# shellcheck disable=SC2086 # DEV_FLAGS is a list of flags
BENCH_DEV_ENV="$API_ENV" bench_dev_start "$server" "$DIR" "$PORT_BASE" "$log" --target "$TARGET" $DEV_FLAGS
api_pid=$DEV_PID
rss_reset=1
bench_rss_reset "$api_pid" || { rss_reset=0; echo "note: /proc/$api_pid/clear_refs refused: the peak RSS is the process's since it started"; }

gen() { # the generator against the stack: loadgen events FLAGS...
	"$bin" loadgen events --url "$DEV_URL" --credentials "$DEV_CREDENTIALS" --batch "$BATCH" --timeout "$TIMEOUT" --json "$@"
}
run=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n') # the run's ids: <run>01 normal, <run>02 victim, <run>03 overload

if [ -z "$RATE" ]; then
	gen --duration "$FIND" --warmup 1s --concurrency "$CONCURRENCY" --rate 0 --id-prefix "${run}00" > "$out/find.json"
	RATE=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(max(1, round(float(sys.argv[2]) * d["requests_per_sec"])))' "$out/find.json" "$RATE_SHARE")
	python3 - "$out/find.json" "$RATE_SHARE" "$RATE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"closed loop ({d['concurrency']} connections): {d['requests_per_sec']:.0f} requests/s, p99 {d['p99_ms']:.1f} ms"
      f" -> R = {sys.argv[2]} x that = {sys.argv[3]} requests/s")
PY
fi
over_rate=$(python3 -c 'import sys; print(float(sys.argv[1]) * float(sys.argv[2]))' "$RATE" "$FACTOR")
over_duration=$(python3 -c 'import re,sys; m=re.fullmatch(r"([0-9.]+)(ms|s|m)", sys.argv[1]); v=float(m[1])*{"ms":0.001,"s":1,"m":60}[m[2]]; print(f"{v+1:g}s")' "$DURATION")

echo "normal: R = $RATE requests/s x $BATCH events for $DURATION"
bench_rss_reset "$api_pid" || true
gen --duration "$DURATION" --warmup 1s --concurrency "$CONCURRENCY" --rate "$RATE" \
	--id-prefix "${run}01" --failures "$out/normal.failures" > "$out/normal.json"
bench_rss_peak "$api_pid" > "$out/normal.rss"

echo "overload: R = $RATE requests/s from the victim, $over_rate from another generator ($OVER_CONCURRENCY connections)"
bench_rss_reset "$api_pid" || true
gen --duration "$over_duration" --warmup 1s --concurrency "$OVER_CONCURRENCY" --rate "$over_rate" \
	--id-prefix "${run}03" --failures "$out/overload.failures" > "$out/overload.json" &
over_pid=$!
gen --duration "$DURATION" --warmup 1s --concurrency "$CONCURRENCY" --rate "$RATE" \
	--id-prefix "${run}02" --failures "$out/victim.failures" > "$out/victim.json"
wait "$over_pid"
bench_rss_peak "$api_pid" > "$out/overload.rss"

stored=0
if [ "$TARGET" = all ]; then
	# The fold writes what Kafka took: wait until the run's count in ClickHouse has not moved for 5 s and
	# holds at least every event answered 200.
	want=$(python3 -c 'import json,sys; print(sum(json.load(open(p))["events_ok_all"] for p in sys.argv[1:]))' \
		"$out/normal.json" "$out/victim.json" "$out/overload.json")
	q="SELECT count() FROM events WHERE substring(event_id, 1, 8) IN ('${run}01', '${run}02', '${run}03')"
	last=-1 same=0 t0=$SECONDS
	while :; do
		n=$(bench_ch_query "$DEV_CH_HTTP" "$q" 2>/dev/null || echo -1)
		if [ "$n" = "$last" ] && [ "$n" -ge "$want" ]; then same=$((same + 1)); else same=0; fi
		last=$n
		[ "$same" -ge 5 ] && { stored=1; break; }
		if [ $((SECONDS - t0)) -ge "$DRAIN_TIMEOUT" ]; then
			echo "WARNING: after $DRAIN_TIMEOUT s ClickHouse holds $n of the run's events, $want were answered 200: the counts below are partial" >&2
			stored=1
			break
		fi
		sleep 1
	done
	echo "stored: $last events of the run in ClickHouse after $((SECONDS - t0)) s ($want answered 200)"
	bench_ch_query "$DEV_CH_HTTP" "SELECT substring(event_id, 1, 34) AS k, count() FROM events
		WHERE substring(event_id, 1, 8) IN ('${run}01', '${run}02', '${run}03') GROUP BY k FORMAT TabSeparated" > "$out/stored.tsv"
fi

python3 - "$out" "$run" "$stored" "$rss_reset" "$RATE" "$FACTOR" "$TARGET" "$LABEL" "$SUMMARY" <<'PY'
import collections, json, sys
out, run, stored, rss_reset, rate, factor, target, label, summary = sys.argv[1:10]
counts = collections.Counter()  # request key -> events stored
if stored == "1":
    for line in open(f"{out}/stored.tsv"):
        k, n = line.split("\t")
        counts[k] = int(n)
prefix = {"normal": run + "01", "victim": run + "02", "overload": run + "03"}

def gen(name):
    d = json.load(open(f"{out}/{name}.json"))
    st = {int(k): v for k, v in d["statuses"].items()}
    other = sum(v for k, v in st.items() if k not in (200, 503, 429))
    r = {"rate": d["target_rate"], "ok": st.get(200, 0), "s503": st.get(503, 0), "s429": st.get(429, 0),
         "errors": other, "unsent": d["unsent"], "abandoned": d["abandoned"],
         "ok_p50_ms": d["ok_p50_ms"], "ok_p99_ms": d["ok_p99_ms"], "p99_ms": d["p99_ms"],
         "events_ok_all": d["events_ok_all"], "first_error": d.get("first_error", "")}
    if stored == "1":
        # Stored events by the status of their request (whole run, warmup included); the rest were answered 200.
        by = collections.Counter()
        failed = 0
        for line in open(f"{out}/{name}.failures"):
            k, s = line.rstrip("\n").split("\t")
            by[int(s)] += counts.get(k, 0)
            failed += counts.get(k, 0)
        total = sum(n for k, n in counts.items() if k.startswith(prefix[name]))
        r.update(stored=total, stored_503=by.get(503, 0), stored_unanswered=by.get(-1, 0),
                 stored_other_failed=failed - by.get(503, 0) - by.get(-1, 0), stored_200=total - failed)
    return r

res = {"label": label, "target": target, "rate": float(rate), "factor": float(factor),
       "normal": gen("normal"), "victim": gen("victim"), "overload": gen("overload"),
       "rss_normal_mib": int(open(f"{out}/normal.rss").read() or 0),
       "rss_overload_mib": int(open(f"{out}/overload.rss").read() or 0), "rss_reset": rss_reset == "1"}
n, v = res["normal"], res["victim"]
res["p99_ratio"] = v["ok_p99_ms"] / n["ok_p99_ms"] if n["ok_p99_ms"] else None

def line(phase, who, r):
    s = (f"{phase:9s} {who:9s} offered {r['rate']:>8.0f}/s  200 {r['ok']:>7d}  503 {r['s503']:>7d}  429 {r['s429']:>5d}"
         f"  errors {r['errors']:>5d}  unsent {r['unsent']:>7d}  200s' p50 {r['ok_p50_ms']:8.2f}  p99 {r['ok_p99_ms']:8.2f} ms")
    if "stored" in r:
        s += f"  stored: 503s' {r['stored_503']}, unanswered {r['stored_unanswered']}, other failures' {r['stored_other_failed']}"
    print(s)
    if r["first_error"]:
        print(f"{'':20s}first error: {r['first_error'][:160]}")

line("normal", "victim", n)
line("overload", "victim", v)
line("overload", "other", res["overload"])
ratio = f"{res['p99_ratio']:.2f}" if res["p99_ratio"] is not None else "n/a"
print(f"victim's p99 of 200s, overload / normal: {ratio}")
note = "" if res["rss_reset"] else " (peak since start: clear_refs refused)"
print(f"API process peak RSS: normal {res['rss_normal_mib']} MiB, overload {res['rss_overload_mib']} MiB{note}")
if stored != "1":
    print("stored events: not counted (TARGET=api: nothing folds the events)")
if summary:
    with open(summary, "a") as f:
        f.write(json.dumps(res) + "\n")
PY
