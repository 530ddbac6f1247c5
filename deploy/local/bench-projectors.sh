#!/usr/bin/env bash
# Projectors under load (docs/design/performance.md, Events fold under load; with
# CATCHUP=1, Events fold: catch-up): posts /v2/events open loop at RATE requests/s
# × BATCH events for DURATION, with a share of sponsored impressions and clicks
# carrying real auction winners' resolvedBidIds (so the charges and attribution
# projectors have work), and watches the projectors fold it into ClickHouse.
#
# Every 5 s it samples $URL/metrics and prints each consumer group's summed
# lag (endcap_kafka_consumer_lag_records). After the load it keeps sampling
# until every group's lag is at most DRAIN_LAG (or DRAIN_TIMEOUT passes), then
# prints per group: records consumed and the fold rate during the load and
# over load + drain, the maximum lag and the time to drain; and the p50/p95 of
# click/impression → charge row visibility from the histogram
# endcap_charge_visible_seconds (API receipt → charge inserted, first
# application of each winner only), interpolated within its buckets.
#
# Endcap: uses the one running at URL (`make run`), or, when none answers and
# START=1 (the default), starts `bin/endcap dev` itself and stops it at the end.
#
# CATCHUP=1 measures the projector alone instead: it starts `bin/endcap dev
# --target api` (nothing folds the events topic), runs the same load, stops
# it, starts `bin/endcap dev` again (every target) with no load, and samples
# every second until the events fold has consumed the whole backlog: the
# records folded, the time from the first to the last, the fold rate and its
# best 10 s, the fold's steps a batch (poll, decode, claim, sinks, commit), each sink's mean batch time, each insert's and the charges' mean
# time, the machine's CPU by state (user, system, idle, steal...), the charges by outcome, Redis's commands of the catch-up by
# the time Redis spent in them (INFO commandstats, reset at its start) and the fold process's peak RSS. It needs START=1 and nothing
# answering at URL; use a stack of its own (ENDCAP_DEV_DIR, `make clean-dev`).
# With SPLIT=1 the broker runs in a process of its own (`endcap kafka`) from the
# start, as in production, and the catch-up's fold is `endcap serve --target
# projector` on PROJECTOR_ADDR (127.0.0.1:8082) beside an idle `endcap dev
# --target api --kfake=false` (the local stack): without SPLIT the broker's
# whole log is in the fold's heap, which its collector then marks.
#
# MINT=1 (the default) gives each sponsored impression an auction of its own,
# as in production, so that every sponsored impression and click is charged:
# the generator re-signs a pool winner with a fresh auction id
# (`loadgen events --bid-signing-keys`). That needs the API's signing key:
# when this script starts the stack it signs with a random key of the run's
# (ENDCAP_BID_SIGNING_KEYS); against a running stack, export the stack's
# ENDCAP_BID_SIGNING_KEYS (a `make run` keeps its key in Redis, wrapped:
# `ENDCAP_SECRET_KEY_FILE=.endcap/dev/secret.key ./bin/endcap admin secrets
# bid-keys` prints it), or the pool's winners are reused and nearly all of
# their charges are duplicates. MINT=0 reuses them on purpose.
# Settings via environment:
#   DURATION (2m) RATE (1000 requests/s) BATCH (50 events per request) CONCURRENCY (256)
#   SPONSORED_SHARE (0.5) USERS (100000) DRAIN_LAG (0) DRAIN_TIMEOUT (600 s) CATCHUP (0) MINT (1)
#   URL (http://127.0.0.1:8080) START (1) BIN (./bin/endcap, rebuilt) SPLIT (0, with CATCHUP=1)
#   PROJECTOR_ADDR (127.0.0.1:8082) PROJECTOR_ENV (with SPLIT=1: NAME=value words for the catch-up's
#   projector process only, e.g. "GOGC=400")
#   ENDCAP_DEV_DIR (.endcap) CREDENTIALS ($ENDCAP_DEV_DIR/dev/credentials.json)
#   SETTLE (0; with CATCHUP=1: after the catch-up, wait until ClickHouse has run no merge for 5 s, at most
#   SETTLE_TIMEOUT s (600), and print ClickHouse's CPU for the catch-up and the merges it left)
#   CH_HTTP_PORT (18123, the local ClickHouse's HTTP port)
#   CATCHUP_RATE (0; with CATCHUP=1: requests/s x BATCH events of open-loop load sent to the process that
#   folds the backlog, for DURATION from the start of the catch-up, whose latency it prints: the API's latency
#   beside a fold that catches up, docs/design/performance.md, The API beside a catching-up fold; without SPLIT=1, the
#   API and the fold share one process)
#   DEV_FLAGS (more flags for every endcap dev the script starts, e.g. ports: --kfake --mail-smtp-port 21025)
#   CH_LOGS (0; 1: the local ClickHouse keeps system.query_log and system.part_log (endcap dev
#   --clickhouse-system-logs), and with CATCHUP=1 the script prints, after the catch-up (and SETTLE), per table
#   the parts the inserts wrote and the merges (count, rows, MiB, seconds), the tables' sizes, and the statements
#   that took the most time and CPU. Both logs cost ClickHouse some CPU: leave it off for the figures)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
DURATION="${DURATION:-2m}" RATE="${RATE:-1000}" BATCH="${BATCH:-50}" CONCURRENCY="${CONCURRENCY:-256}"
SPONSORED_SHARE="${SPONSORED_SHARE:-0.5}" USERS="${USERS:-100000}"
DRAIN_LAG="${DRAIN_LAG:-0}" DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-600}" CATCHUP="${CATCHUP:-0}"
URL="${URL:-http://127.0.0.1:8080}" START="${START:-1}" MINT="${MINT:-1}"
SETTLE="${SETTLE:-0}" SETTLE_TIMEOUT="${SETTLE_TIMEOUT:-600}" CH_HTTP_PORT="${CH_HTTP_PORT:-18123}"
CH_LOGS="${CH_LOGS:-0}" CATCHUP_RATE="${CATCHUP_RATE:-0}" DEV_FLAGS="${DEV_FLAGS:-}"
[ "$CH_LOGS" = 1 ] && export ENDCAP_DEV_CLICKHOUSE_LOGS=1
SPLIT="${SPLIT:-0}" PROJECTOR_ADDR="${PROJECTOR_ADDR:-127.0.0.1:8082}" PROJECTOR_ENV="${PROJECTOR_ENV:-}"
export ENDCAP_DEV_DIR="${ENDCAP_DEV_DIR:-.endcap}"
# The local S3 server's keys (endcap dev's; not defaults of the configuration).
export ENDCAP_S3_ACCESS_KEY="${ENDCAP_S3_ACCESS_KEY:-endcap}" ENDCAP_S3_SECRET_KEY="${ENDCAP_S3_SECRET_KEY:-endcap-dev-secret}"
mint_keys=""
if [ "$MINT" = 1 ]; then
	if [ -z "${ENDCAP_BID_SIGNING_KEYS:-}" ] && [ "$START" = 1 ] && ! curl -fsS "$URL/readyz" >/dev/null 2>&1; then
		export ENDCAP_BID_SIGNING_KEYS="1:$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')"
	fi
	mint_keys="${ENDCAP_BID_SIGNING_KEYS:-}"
	[ -n "$mint_keys" ] || echo "MINT=1 without the running stack's ENDCAP_BID_SIGNING_KEYS: the pool's winners are reused" >&2
fi
CREDENTIALS="${CREDENTIALS:-$ENDCAP_DEV_DIR/dev/credentials.json}"
bin="${BIN:-./bin/endcap}"
# Not with the runs' GODEBUG (gctrace=1): the go command would cache the compiler's trace lines as its
# output and print them again on every later build and vet.
env -u GODEBUG go build -tags dev -o "$bin" ./cmd/endcap

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

ch_pid() { # the stack's clickhouse-server
	pgrep -f "clickhouse-server --config-file=$(realpath "$ENDCAP_DEV_DIR")/" | head -1
}
redis_pid() { # the stack's redis-server
	pgrep -f "redis-server .*--dir $(realpath "$ENDCAP_DEV_DIR")/" | head -1
}
proc_cpu() { # pid: its user + system CPU in clock ticks (0 when gone)
	awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
cpu_s() { # ticks0 ticks1: the seconds between
	awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.0f", (b - a) / hz}'
}

ch_report() { # with CH_LOGS=1: where ClickHouse's time went (system.part_log, system.query_log)
	local q="curl -fsS --max-time 60 http://127.0.0.1:$CH_HTTP_PORT/?database=${ENDCAP_CLICKHOUSE_DATABASE:-endcap} --data-binary"
	$q "SYSTEM FLUSH LOGS" >/dev/null || { echo "ClickHouse's logs: not read"; return; }
	echo "ClickHouse, parts written by inserts and merges (system.part_log; seconds: of the threads that wrote them):"
	$q "SELECT table, event_type, count() AS parts, sum(rows) AS rows, round(sum(size_in_bytes) / 1048576) AS MiB,
		round(sum(duration_ms) / 1000, 1) AS seconds FROM system.part_log WHERE database = currentDatabase()
		GROUP BY table, event_type ORDER BY seconds DESC FORMAT PrettyCompactNoEscapes"
	echo "ClickHouse, tables (active parts):"
	$q "SELECT table, sum(rows) AS rows, count() AS parts, round(sum(data_compressed_bytes) / 1048576) AS MiB,
		round(sum(data_uncompressed_bytes) / 1048576) AS MiB_uncompressed FROM system.parts
		WHERE active AND database = currentDatabase() GROUP BY table ORDER BY MiB_uncompressed DESC FORMAT PrettyCompactNoEscapes"
	echo "ClickHouse, statements by total time (system.query_log; numbers replaced by N):"
	$q "SELECT substring(replaceRegexpAll(replaceRegexpAll(query, '[0-9]+', 'N'), '\\\\s+', ' '), 1, 80) AS statement,
		count() AS n, round(sum(query_duration_ms) / 1000, 1) AS seconds, sum(read_rows) AS rows_read,
		sum(written_rows) AS rows_written FROM system.query_log WHERE type = 2 AND query NOT LIKE '%system.%'
		GROUP BY statement ORDER BY seconds DESC LIMIT 15 FORMAT PrettyCompactNoEscapes"
	echo "ClickHouse, statements by CPU (system.query_log's UserTimeMicroseconds and SystemTimeMicroseconds, the query's threads):"
	$q "SELECT substring(replaceRegexpAll(replaceRegexpAll(query, '[0-9]+', 'N'), '\\s+', ' '), 1, 80) AS statement,
		count() AS n, round(sum(arrayElement(ProfileEvents.Values, indexOf(ProfileEvents.Names, 'UserTimeMicroseconds'))
		+ arrayElement(ProfileEvents.Values, indexOf(ProfileEvents.Names, 'SystemTimeMicroseconds'))) / 1e6, 1) AS cpu_seconds,
		sum(read_rows) AS rows_read FROM system.query_log WHERE type = 2 AND query NOT LIKE '%system.%'
		GROUP BY statement ORDER BY cpu_seconds DESC LIMIT 15 FORMAT PrettyCompactNoEscapes" || echo "(not in this ClickHouse's query_log)"
}

redis_resetstat() { # the catch-up's Redis commands alone in INFO commandstats (printed after it)
	python3 deploy/local/rediscmd.py "${ENDCAP_REDIS_ADDR:-127.0.0.1:16379}" CONFIG RESETSTAT >/dev/null ||
		echo "Redis: CONFIG RESETSTAT failed: its commands below include the load's" >&2
}

start_dev() { # name [dev flags...]: start bin/endcap dev and wait until it is ready
	local log="$ENDCAP_DEV_DIR/logs/bench-projectors-$1.log"
	shift
	mkdir -p "$ENDCAP_DEV_DIR/logs"
	echo "starting endcap dev $* (log: $log)"
	# shellcheck disable=SC2086 # DEV_FLAGS is a list of words
	ENDCAP_RATE_LIMIT_DEFAULT=1000000/1s "$bin" dev --clickhouse-http-port "$CH_HTTP_PORT" --demo-traffic=false $DEV_FLAGS "$@" > "$log" 2>&1 &
	dev_pid=$!
	pids+=($dev_pid)
	for _ in $(seq 1 600); do curl -fsS "$URL/readyz" >/dev/null 2>&1 && break; sleep 1; done
	curl -fsS "$URL/readyz" >/dev/null || { echo "endcap dev did not become ready; see $log" >&2; exit 1; }
	# Ready is before the demo marketplace and its keys exist: its banner says they do.
	for _ in $(seq 1 600); do grep -q "Endcap is running" "$log" && break; sleep 1; done
	grep -q "Endcap is running" "$log" || { echo "endcap dev wrote no demo marketplace; see $log" >&2; exit 1; }
}

run_load() { # the load generator, then its summary
	"$bin" loadgen events --url "$URL" --credentials "$CREDENTIALS" --duration "$DURATION" --rate "$RATE" \
		--batch "$BATCH" --concurrency "$CONCURRENCY" --users "$USERS" --sponsored-share "$SPONSORED_SHARE" \
		--bid-signing-keys "$mint_keys" --json > "$1/loadgen.json" || echo "loadgen failed" >&2
	python3 - "$1/loadgen.json" "$RATE" "$BATCH" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); rate, batch = float(sys.argv[2]), int(sys.argv[3])
print(f"loadgen: offered {rate * batch:.0f} events/s ({rate:.0f} req/s x {batch}); accepted {d['events_per_sec']:.0f} events/s, "
      f"ok {d['ok']} failed {d['failed']} unsent {d.get('unsent', 0)}; latency p50 {d['p50_ms']:.1f} p99 {d['p99_ms']:.1f} ms")
if d.get("first_error"):
    print("  first error:", d["first_error"][:200])
PY
}

if [ "$CATCHUP" = 1 ]; then
	if [ "$START" != 1 ] || curl -fsS "$URL/readyz" >/dev/null 2>&1; then
		echo "CATCHUP=1 starts and stops endcap dev itself: stop the Endcap at $URL first" >&2
		exit 1
	fi
	out=$(mktemp -d)
	echo "results in $out"
	fold_url="$URL"
	if [ "$SPLIT" = 1 ]; then
		klog="$ENDCAP_DEV_DIR/logs/bench-projectors-kafka.log"
		mkdir -p "$ENDCAP_DEV_DIR/logs"
		echo "starting endcap kafka (log: $klog)"
		"$bin" kafka --dir "$ENDCAP_DEV_DIR" > "$klog" 2>&1 &
		kafka_pid=$!
		pids+=($!)
		start_dev api --target api --kfake=false
	else
		start_dev api --target api
	fi
	run_load "$out"
	kill "$dev_pid"
	wait "$dev_pid" || true
	if [ "$SPLIT" = 1 ]; then
		start_dev stack --target api --kfake=false
		plog="$ENDCAP_DEV_DIR/logs/bench-projectors-projector.log"
		echo "starting endcap serve --target projector on $PROJECTOR_ADDR (log: $plog)"
		# shellcheck disable=SC2086 # PROJECTOR_ENV is a list of NAME=value words
		ch_cpu0=$(proc_cpu "$(ch_pid)") redis_cpu0=$(proc_cpu "$(redis_pid)") kafka_cpu0=$(proc_cpu "$kafka_pid")
		redis_resetstat
		env $PROJECTOR_ENV ENDCAP_HTTP_ADDR="$PROJECTOR_ADDR" "$bin" serve --target projector > "$plog" 2>&1 &
		pids+=($!)
		fold_pid=$!
		fold_url="http://$PROJECTOR_ADDR"
		for _ in $(seq 1 600); do curl -fsS "$fold_url/readyz" >/dev/null 2>&1 && break; sleep 1; done
		fold_cpu0=$(proc_cpu "$fold_pid") # its start (the claim store, the views) is not the catch-up's
	else
		start_dev all
		fold_pid=$dev_pid
		ch_cpu0=$(proc_cpu "$(ch_pid)") redis_cpu0=$(proc_cpu "$(redis_pid)") kafka_cpu0=0 kafka_pid="" fold_cpu0=$(proc_cpu "$fold_pid")
		redis_resetstat
	fi
	if [ "$CATCHUP_RATE" != 0 ]; then
		# Open-loop load on the API while the fold catches up (the stack's API: the same process as the fold
		# without SPLIT=1).
		echo "load during the catch-up: $CATCHUP_RATE requests/s x $BATCH events for $DURATION"
		"$bin" loadgen events --url "$URL" --credentials "$CREDENTIALS" --duration "$DURATION" --rate "$CATCHUP_RATE" \
			--batch "$BATCH" --concurrency "$CONCURRENCY" --users "$USERS" --sponsored-share "$SPONSORED_SHARE" \
			--bid-signing-keys "$mint_keys" --json > "$out/catchup-load.json" 2>"$out/catchup-load.err" &
		catchup_load=$!
		pids+=($catchup_load)
	fi
	python3 - "$fold_url" "$DRAIN_TIMEOUT" <<'PY'
import sys, time
sys.path.insert(0, "deploy/local")
from metrics import samples
url, timeout = sys.argv[1], float(sys.argv[2])
group = "endcap-projector-events"

def scrape():
    m = {"lag": None, "consumed": 0.0, "sink_sum": {}, "sink_count": {}, "step_sum": {}, "step_count": {}, "fold_sum": {}, "fold_count": {}}
    for name, labels, v in samples(url):
        if labels.get("group") == group and name == "endcap_kafka_consumer_lag_records":
            m["lag"] = (m["lag"] or 0) + v
        elif labels.get("group") == group and name == "endcap_kafka_consumed_records_total":
            m["consumed"] += v
        elif name == "endcap_projector_sink_batch_seconds_sum":
            m["sink_sum"][labels["sink"]] = v
        elif name == "endcap_projector_sink_batch_seconds_count":
            m["sink_count"][labels["sink"]] = v
        # The steps inside the sinks: each table's insert, the charges applied in Redis.
        elif name == "endcap_clickhouse_insert_duration_seconds_sum":
            m["step_sum"]["insert " + labels["table"]] = v
        elif name == "endcap_clickhouse_insert_duration_seconds_count":
            m["step_count"]["insert " + labels["table"]] = v
        elif name == "endcap_budget_charge_apply_seconds_sum":
            m["step_sum"]["charges applied in Redis"] = v
        elif name == "endcap_budget_charge_apply_seconds_count":
            m["step_count"]["charges applied in Redis"] = v
        # The fold's own steps around the sinks (poll, decode, claim, sinks, commit).
        elif labels.get("group") == group and name == "endcap_projector_step_seconds_sum":
            m["fold_sum"][labels["step"]] = v
        elif labels.get("group") == group and name == "endcap_projector_step_seconds_count":
            m["fold_count"][labels["step"]] = v
    return m

def cpu():
    # The machine's CPU time by state (/proc/stat, USER_HZ ticks): the catch-up's share of each.
    f = open("/proc/stat").readline().split()
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    return dict(zip(names, map(int, f[1:9])))

t0 = time.time(); points = []; first = None; maxlag = 0; cpu0 = cpu()
while time.time() - t0 < timeout:
    time.sleep(1)
    now, s = time.time(), scrape()
    points.append((now, s["consumed"]))
    maxlag = max(maxlag, s["lag"] or 0)
    if first is None and s["consumed"] > 0:
        first = points[-2] if len(points) > 1 else (t0, 0.0)
    if len(points) % 5 == 0:
        print(f"t={now - t0:5.0f}s folded {s['consumed']:>10.0f}  lag {s['lag']}", flush=True)
    if first is not None and s["lag"] is not None and s["lag"] <= 0:
        break
else:
    print(f"NOT DRAINED within {timeout:.0f} s"); sys.exit(1)
span = now - first[0]
best = max((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(points, points[10:])) if len(points) > 10 else 0
print(f"\ncatch-up of {group}: {s['consumed']:.0f} records folded in {span:.0f} s (first poll that consumed to lag 0): "
      f"{s['consumed'] / span:.0f} records/s; best 10 s {best:.0f}/s; backlog at the first lag sample {maxlag:.0f}")
batches = s["fold_count"].get("commit", 0)
if batches > 0:
    # Per batch committed: a batch may take several polls, so poll is their sum.
    print("fold steps, seconds a batch: " + ", ".join(
        f"{k} {s['fold_sum'][k] / batches:.3f}" for k in ("poll", "decode", "claim", "sinks", "commit") if k in s["fold_sum"])
        + f" (whole catch-up: {span / batches:.3f})")
for k in sorted(s["sink_count"]):
    if s["sink_count"][k] > 0:
        print(f"sink {k}: {s['sink_count'][k]:.0f} batches, mean {s['sink_sum'][k] / s['sink_count'][k]:.3f} s a batch")
for k in sorted(s["step_count"]):
    if s["step_count"][k] > 0:
        print(f"  {k}: {s['step_count'][k]:.0f} calls, mean {s['step_sum'][k] / s['step_count'][k]:.3f} s")
cpu1 = cpu()
ticks = {k: cpu1[k] - cpu0[k] for k in cpu0}
total = sum(ticks.values()) or 1
print("machine CPU during the catch-up: " + ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in ticks.items() if v > 0))

# Redis after the fold: its memory, the charges' markers, and the commands of the catch-up by the time
# Redis spent in them (INFO commandstats, reset at the catch-up's start; a script's commands count under their
# own names too, inside the script's time).
import os
from rediscmd import command, commandstats
raddr = os.environ.get("ENDCAP_REDIS_ADDR", "127.0.0.1:16379")
try:
    used = next(int(l.split(":")[1]) for l in command(raddr, "INFO", "memory").splitlines() if l.startswith("used_memory:"))
    keys = command(raddr, "DBSIZE")
    outcomes = {}
    for name, labels, v in samples(url):
        if name == "endcap_charges_total":
            outcomes[labels.get("outcome")] = outcomes.get(labels.get("outcome"), 0) + v
    print(f"Redis: used_memory {used / 2**20:.0f} MiB, {keys} keys; {s['consumed']:.0f} events folded; charges by outcome: "
          + (", ".join(f"{k} {v:.0f}" for k, v in sorted(outcomes.items())) or "none"))
    refused = {}
    for name, labels, v in samples(url):
        if name == "endcap_charges_refused_total" and v > 0:
            refused[labels.get("reason")] = refused.get(labels.get("reason"), 0) + v
    print("sponsored interactions not charged, by reason: " + (", ".join(f"{k} {v:.0f}" for k, v in sorted(refused.items())) or "none"))
    # usec is the time inside the command (a script's includes its commands'), a wall time: on a loaded
    # machine more than Redis's CPU.
    stats = commandstats(raddr)
    print("Redis commands during the catch-up, by time inside them: "
          + "; ".join(f"{k} {c} calls {u / 1e6:.1f} s ({u / max(c, 1):.0f} µs a call)" for k, (c, u) in sorted(stats.items(), key=lambda kv: -kv[1][1])[:8]))
except (OSError, ValueError, StopIteration, IndexError, KeyError) as e:
    print(f"Redis: not read ({e})")
# The fold's claim store on local disk (endcap_projector_claim_store_bytes).
store = {labels["kind"]: v for name, labels, v in samples(url) if name == "endcap_projector_claim_store_bytes"}
if store:
    print(f"claim store: disk {store.get('disk', 0) / 2**20:.0f} MiB ({store.get('disk', 0) / max(s['consumed'], 1):.1f} B a record folded), "
          f"block cache {store.get('cache', 0) / 2**20:.0f} MiB, memtables {store.get('memtable', 0) / 2**20:.0f} MiB")
PY
	echo "the fold's process: peak RSS $(awk '/^VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$fold_pid/status" 2>/dev/null || echo "not read")"
	ch_cpu1=$(proc_cpu "$(ch_pid)") redis_cpu1=$(proc_cpu "$(redis_pid)") fold_cpu1=$(proc_cpu "$fold_pid")
	echo "ClickHouse's CPU during the catch-up: $(cpu_s "$ch_cpu0" "$ch_cpu1") s"
	# CPU a record across the stack: what a 2-core machine's best rate is (2 s / CPU-s a record). Without
	# SPLIT=1 the fold's process also runs the broker.
	folded=$(curl -fsS --max-time 5 "$fold_url/metrics" | awk '/^endcap_kafka_consumed_records_total\{.*group="endcap-projector-events"/ {s += $2} END {printf "%.0f", s}')
	kafka_cpu1=0
	[ -n "$kafka_pid" ] && kafka_cpu1=$(proc_cpu "$kafka_pid")
	awk -v hz="$(getconf CLK_TCK)" -v n="$folded" -v ch=$((ch_cpu1 - ch_cpu0)) -v fold=$((fold_cpu1 - fold_cpu0)) \
		-v redis=$((redis_cpu1 - redis_cpu0)) -v kafka=$((kafka_cpu1 - kafka_cpu0)) 'BEGIN {
		if (n <= 0) { print "CPU a record: no records folded"; exit }
		t = (ch + fold + redis + kafka) / hz
		printf "CPU during the catch-up, s: ClickHouse %.1f, fold %.1f, Redis %.1f, broker %.1f; a record: %.1f us (ClickHouse %.1f, fold %.1f, Redis %.1f, broker %.1f); 2 cores: at most %.0f records/s\n",
			ch / hz, fold / hz, redis / hz, kafka / hz, t * 1e6 / n, ch * 1e6 / hz / n, fold * 1e6 / hz / n, redis * 1e6 / hz / n, kafka * 1e6 / hz / n, 2 * n / t
	}'
	if [ "$CATCHUP_RATE" != 0 ]; then
		wait "$catchup_load" || echo "the load during the catch-up failed: $(head -c 300 "$out/catchup-load.err")" >&2
		python3 - "$out/catchup-load.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"API during the catch-up (open loop): accepted {d['events_per_sec']:.0f} events/s, ok {d['ok']} failed {d['failed']} "
      f"unsent {d.get('unsent', 0)}; latency p50 {d['p50_ms']:.1f} p99 {d['p99_ms']:.1f} ms")
PY
	fi
	if [ "$SETTLE" = 1 ]; then
		# The merges of what the catch-up wrote go on after it: wait until none has run for 5 s.
		quiet=0 t0=$SECONDS
		while [ $((SECONDS - t0)) -lt "$SETTLE_TIMEOUT" ] && [ "$quiet" -lt 5 ]; do
			m=$(curl -fsS --max-time 5 "http://127.0.0.1:$CH_HTTP_PORT/" --data-binary "SELECT count() FROM system.merges" 2>/dev/null || echo error)
			if [ "$m" = 0 ]; then quiet=$((quiet + 1)); else quiet=0; fi
			sleep 1
		done
		ch_cpu2=$(proc_cpu "$(ch_pid)")
		echo "ClickHouse's CPU for the catch-up and its merges: $(cpu_s "$ch_cpu0" "$ch_cpu2") s ($((SECONDS - t0)) s after it, merges $([ "$quiet" -ge 5 ] && echo done || echo "still running"))"
	fi
	[ "$CH_LOGS" = 1 ] && ch_report
	exit 0
fi

if ! curl -fsS "$URL/readyz" >/dev/null 2>&1; then
	if [ "$START" != 1 ]; then
		echo "Endcap is not ready at $URL: start it with 'make run' first" >&2
		exit 1
	fi
	start_dev dev
fi

out=$(mktemp -d)
echo "results in $out"
# The sampler runs until the file $out/stop-load appears, then until drained; it prints as it goes.
python3 - "$URL" "$out" "$DRAIN_LAG" "$DRAIN_TIMEOUT" <<'PY' &
import sys, time
sys.path.insert(0, "deploy/local")
from metrics import samples
url, out, drain_lag, drain_timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

def scrape():
    m = {"lag": {}, "consumed": {}, "produced": 0.0, "accepted": 0.0, "hist": {}, "hist_count": 0.0, "sink_sum": {}, "sink_count": {}}
    for name, labels, v in samples(url):
        if name == "endcap_kafka_consumer_lag_records":
            m["lag"][labels["group"]] = m["lag"].get(labels["group"], 0) + v
        elif name == "endcap_kafka_consumed_records_total":
            m["consumed"][labels["group"]] = m["consumed"].get(labels["group"], 0) + v
        elif name == "endcap_kafka_produced_records_total" and labels.get("result") == "ok":
            m["produced"] += v
        elif name == "endcap_events_accepted_total":
            m["accepted"] += v
        elif name == "endcap_charge_visible_seconds_bucket":
            m["hist"][labels["le"]] = v
        elif name == "endcap_charge_visible_seconds_count":
            m["hist_count"] = v
        elif name == "endcap_projector_sink_batch_seconds_sum":
            m["sink_sum"][labels["sink"]] = v
        elif name == "endcap_projector_sink_batch_seconds_count":
            m["sink_count"][labels["sink"]] = v
    return m

def quantile(h0, h1, q):
    les = sorted((float(k), h1[k] - h0.get(k, 0)) for k in h1)
    total = les[-1][1] if les else 0
    if total <= 0:
        return None
    want, prev_le, prev_c = q * total, 0.0, 0.0
    for le, c in les:
        if c >= want:
            if le == float("inf"):
                return -prev_le  # beyond the last finite bucket: a lower bound, marked negative
            return prev_le + (le - prev_le) * (want - prev_c) / max(c - prev_c, 1e-9)
        prev_le, prev_c = le, c
    return prev_le

import os
t0 = time.time(); s0 = scrape(); maxlag = {}; load_end = None; s_end = None; drained = {}
while True:
    time.sleep(5)
    now = time.time(); s = scrape()
    groups = sorted(set(s["lag"]) | set(s["consumed"]))
    for g in groups:
        maxlag[g] = max(maxlag.get(g, 0), s["lag"].get(g, 0))
    print(f"t={now - t0:6.0f}s accepted {s['accepted'] - s0['accepted']:>10.0f}  lag " +
          "  ".join(f"{g.replace('endcap-projector-', '')}={s['lag'].get(g, 0):.0f}" for g in groups), flush=True)
    if load_end is None and os.path.exists(out + "/stop-load"):
        load_end, s_end = now, s
    if load_end is not None:
        for g in groups:
            if g not in drained and s["lag"].get(g, 0) <= drain_lag:
                drained[g] = now - load_end
        if all(g in drained for g in groups) or now - load_end > drain_timeout:
            break
load_s = load_end - t0
print(f"\nload {load_s:.0f} s; events accepted {s_end['accepted'] - s0['accepted']:.0f} "
      f"({(s_end['accepted'] - s0['accepted']) / load_s:.0f}/s); records produced {s_end['produced'] - s0['produced']:.0f}")
print(f"{'group':44s} {'consumed(load)':>14s} {'rate(load)/s':>12s} {'consumed(all)':>13s} {'rate(all)/s':>11s} {'max lag':>10s} {'drain s':>8s}")
for g in groups:
    cl = s_end["consumed"].get(g, 0) - s0["consumed"].get(g, 0)
    ca = s["consumed"].get(g, 0) - s0["consumed"].get(g, 0)
    d = drained.get(g)
    span = load_s + (d if d is not None else now - load_end)
    print(f"{g:44s} {cl:>14.0f} {cl / load_s:>12.0f} {ca:>13.0f} {ca / span:>11.0f} {maxlag.get(g, 0):>10.0f} "
          f"{(f'{d:.0f}' if d is not None else 'NOT DRAINED'):>8s}")
for k in sorted(s["sink_count"]):
    c = s["sink_count"][k] - s0["sink_count"].get(k, 0)
    if c > 0:
        print(f"sink {k}: {c:.0f} batches, mean {(s['sink_sum'][k] - s0['sink_sum'].get(k, 0)) / c:.3f} s a batch")
n = s["hist_count"] - s0["hist_count"]
p50, p95 = quantile(s0["hist"], s["hist"], .5), quantile(s0["hist"], s["hist"], .95)
if p95 is None:
    print("charge visibility: no charge applied during the run")
else:
    fmt = lambda q: f"> {-q:.0f} s" if q < 0 else f"{q:.2f} s"
    print(f"charge visibility (API receipt -> charges row, {n:.0f} first applications): p50 {fmt(p50)}, p95 {fmt(p95)}")
PY
sampler=$!
pids+=($sampler)
run_load "$out"
touch "$out/stop-load"
wait "$sampler" || true
