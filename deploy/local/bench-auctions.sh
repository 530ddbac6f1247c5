#!/usr/bin/env bash
# Side-by-side load test of POST /v2/auctions: Endcap and a bare Gin handler
# that only reads the body and answers 201 with one empty result, in
# alternating rounds so that both see the same machine noise; first open loop
# at RATE requests/s, then closed loop. Prints each round, the medians and the
# Endcap/bare ratios.
#
# Endcap: uses the one running at URL (`make run`), or, when none answers and
# START=1 (the default), starts `bin/endcap dev` itself with the rate limits
# raised for seeding and stops it at the end. Seeding through the public API
# needs those limits raised: start your own Endcap with
#   ENDCAP_RATE_LIMIT_DEFAULT=1000000/1s ENDCAP_RATE_LIMIT_CATALOG=1000000/1s make run
# The marketplace is seeded once (`endcap loadgen seed`, ≈ 1.4 M writes with
# the defaults) and recorded in MANIFEST; later runs reuse it.
#
# Settings via environment:
#   ROUNDS (3) DURATION (10s) CONCURRENCY (32) RATE (1000 requests/s; one auction each)
#   WARMUP (0; e.g. 30s: load Endcap at RATE that long first, not counted)
#   IDS (500 product ids per auction) SLOTS (5) BID_SHARE (0.25) CHECK (0; 1 = check every answer)
#   ZIPF (0 = ids uniform; e.g. 1.1 = by popularity, as search pages are)
#   URL (http://127.0.0.1:8080) BARE_ADDR (127.0.0.1:18099) START (1) BIN (./bin/endcap, rebuilt)
#   ENDCAP_DEV_DIR (.endcap) DEV_FLAGS (extra flags of `endcap dev` when this script starts it)
#   SPLIT (0; 1 = when this script starts Endcap, Kafka, the API and the projectors run as three processes,
#     as in production: `endcap kafka`, `endcap dev --target api --kfake=false` and `endcap serve --target
#     projector` on PROJECTOR_ADDR (127.0.0.1:8082), each with its own heap; the exporter target is not started)
#   SNAPSHOT (empty; a copy of a stopped, seeded ENDCAP_DEV_DIR: when this script starts Endcap it first
#     replaces ENDCAP_DEV_DIR with a fresh copy of it, so that every run starts from the same stack. Make one
#     after a first run has seeded: `cp -a "$ENDCAP_DEV_DIR" /somewhere/auction-stack`)
#   PAUSE_PROJECTOR (0; 1 with SPLIT=1 = the projector process is stopped (SIGSTOP) during each measured Endcap
#     round and resumed (SIGCONT) after it, to measure the API as in production, where the projectors run on
#     other hosts; it folds the round's auctions afterwards, during the bare round)
#   API_ENV (empty; environment of the API process only when this script starts Endcap, e.g.
#     "GOGC=off GOMEMLIMIT=6GiB": collections only near the limit, see docs/operations/operations.md, Memory)
#   MODES ("open closed"; the loop modes to run, in order; "" = none: start, seed and stop) BARE (1; 0 = no bare-handler rounds)
#   LOADGEN_PREFIX (empty; a command put before the measuring `endcap loadgen auctions`, e.g. "nice -n -10" so
#     that the generator, on the same cores as the server, is not the one kept waiting: see docs/design/performance.md, Auctions over HTTP)
#   After each Endcap round it prints the same round as the server timed it (deploy/local/server-latency.py:
#     its p50/p99 and share over 10 ms, from endcap_http_request_duration_seconds): a client p99 far above it
#     means the tail is outside the handler.
#   When this script starts Endcap it also samples each process's CPU every second and, at the end, prints the
#   open-loop rounds' slow seconds beside it (and the collections under way with GODEBUG=gctrace=1).
#   MANIFEST ($ENDCAP_DEV_DIR/dev/auction-seed.json) CREDENTIALS ($ENDCAP_DEV_DIR/dev/credentials.json)
#   SEED_VENDORS (10000) SEED_PRODUCTS (1000000) SEED_CAMPAIGNS (100000) SEED_CONCURRENCY (16)
#   SEED_CAPPED_PERCENT (0; e.g. 20 = that share of the campaigns gets a frequency cap, added to a seeded stack)
#   SHOPPERS (0; e.g. 100000 = every auction carries an opaqueUserId of that many shoppers, so that the capped
#     campaigns' counts are read: run with SHOPPERS=0 and SHOPPERS=N on one seed to see what caps cost)
#   SERVER_BIN (BIN; the build whose processes this script starts, e.g. another commit's: the generator is
#     always BIN) NOBUILD (0; 1 = BIN is built already)
#   PORT_BASE (empty; when this script starts Endcap: every port of its stack from PORT_BASE (the API on it,
#     deploy/local/bench-lib.sh) instead of the defaults, and URL is that API's; not with SPLIT=1)
#   SUMMARY (empty; a file to append the Endcap medians of each mode to as one JSON line, read by
#     deploy/local/bench-compare.sh) LABEL (tree)
# A manifest of other counts, of another marketplace or of an unfinished seed is seeded (again).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=deploy/local/bench-lib.sh
. deploy/local/bench-lib.sh
WARMUP="${WARMUP:-0}" ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-10s}" CONCURRENCY="${CONCURRENCY:-32}" RATE="${RATE:-1000}"
IDS="${IDS:-500}" SLOTS="${SLOTS:-5}" BID_SHARE="${BID_SHARE:-0.25}" CHECK="${CHECK:-0}" ZIPF="${ZIPF:-0}"
URL="${URL:-http://127.0.0.1:8080}" BARE_ADDR="${BARE_ADDR:-127.0.0.1:18099}" START="${START:-1}"
export ENDCAP_DEV_DIR="${ENDCAP_DEV_DIR:-.endcap}"
# The local S3 server's keys (endcap dev's; not defaults of the configuration).
export ENDCAP_S3_ACCESS_KEY="${ENDCAP_S3_ACCESS_KEY:-endcap}" ENDCAP_S3_SECRET_KEY="${ENDCAP_S3_SECRET_KEY:-endcap-dev-secret}"
SNAPSHOT="${SNAPSHOT:-}" LOADGEN_PREFIX="${LOADGEN_PREFIX:-}" DEV_FLAGS="${DEV_FLAGS:-}" SPLIT="${SPLIT:-0}" API_ENV="${API_ENV:-}" MODES="${MODES-open closed}" BARE="${BARE:-1}" PAUSE_PROJECTOR="${PAUSE_PROJECTOR:-0}" PROJECTOR_ADDR="${PROJECTOR_ADDR:-127.0.0.1:8082}"
MANIFEST="${MANIFEST:-$ENDCAP_DEV_DIR/dev/auction-seed.json}" CREDENTIALS="${CREDENTIALS:-$ENDCAP_DEV_DIR/dev/credentials.json}"
SEED_VENDORS="${SEED_VENDORS:-10000}" SEED_PRODUCTS="${SEED_PRODUCTS:-1000000}"
SEED_CAMPAIGNS="${SEED_CAMPAIGNS:-100000}" SEED_CONCURRENCY="${SEED_CONCURRENCY:-16}"
SEED_CAPPED_PERCENT="${SEED_CAPPED_PERCENT:-0}" SHOPPERS="${SHOPPERS:-0}"
bin="${BIN:-./bin/endcap}"
# Not with the runs' GODEBUG (gctrace=1): the go command would cache the compiler's trace lines as its
# output and print them again on every later build and vet.
# Also when it exists: `loadgen seed|auctions` must be there.
[ "${NOBUILD:-0}" = 1 ] || env -u GODEBUG go build -tags dev -o "$bin" ./cmd/endcap
server="${SERVER_BIN:-$bin}" PORT_BASE="${PORT_BASE:-}" SUMMARY="${SUMMARY:-}" LABEL="${LABEL:-tree}"
if [ -n "$PORT_BASE" ]; then
	[ "$SPLIT" = 1 ] && { echo "PORT_BASE is not supported with SPLIT=1" >&2; exit 1; }
	URL="http://127.0.0.1:$PORT_BASE"
fi

pids=()
projector_pid=
sampled=() # label=pid of the processes this script started, for the timeline
logs=()    # label=log of the same
cleanup() { # the last started first: the projector before the stack it uses
	[ -n "$projector_pid" ] && kill -CONT "$projector_pid" 2>/dev/null # a stopped process would not see the TERM
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
	bench_dev_stop
}
trap cleanup EXIT

wait_ready() { # url seconds
	for _ in $(seq 1 "$2"); do
		curl -fsS "$1/readyz" >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}

if ! curl -fsS "$URL/readyz" >/dev/null 2>&1; then
	if [ "$START" != 1 ]; then
		echo "Endcap is not ready at $URL: start it with" >&2
		echo "  ENDCAP_RATE_LIMIT_DEFAULT=1000000/1s ENDCAP_RATE_LIMIT_CATALOG=1000000/1s make run" >&2
		exit 1
	fi
	if [ -n "$SNAPSHOT" ]; then
		# Every run from the same seeded stack: what earlier runs added (auctions in ClickHouse, spend in
		# Redis, records in Kafka) would otherwise make each run a little different from the last.
		[ -d "$SNAPSHOT/dev" ] || { echo "SNAPSHOT $SNAPSHOT is not a stopped stack's directory (no dev/ in it)" >&2; exit 1; }
		if [ "$(realpath -m "$SNAPSHOT")" = "$(realpath -m "$ENDCAP_DEV_DIR")" ]; then
			echo "SNAPSHOT must be a copy, not ENDCAP_DEV_DIR itself" >&2
			exit 1
		fi
		echo "restoring $ENDCAP_DEV_DIR from $SNAPSHOT"
		rm -rf "$ENDCAP_DEV_DIR"
		cp -a "$SNAPSHOT" "$ENDCAP_DEV_DIR"
	fi
	log="$ENDCAP_DEV_DIR/logs/bench-auctions-dev.log"
	mkdir -p "$ENDCAP_DEV_DIR/logs"
	echo "starting endcap dev with raised rate limits (log: $log)"
	target=all kfake=true
	if [ "$SPLIT" = 1 ]; then
		# Kafka (kfake) in a process of its own, as in production: its work and garbage out of the API's.
		klog="$ENDCAP_DEV_DIR/logs/bench-auctions-kafka.log"
		echo "starting endcap kafka (log: $klog)"
		"$server" kafka --dir "$ENDCAP_DEV_DIR" > "$klog" 2>&1 &
		pids+=($!)
		sampled+=("kafka=$!")
		logs+=("kafka=$klog")
		target=api kfake=false
	fi
	if [ -n "$PORT_BASE" ]; then
		# shellcheck disable=SC2086 # DEV_FLAGS is a list of flags
		BENCH_DEV_ENV="$API_ENV ENDCAP_RATE_LIMIT_DEFAULT=1000000/1s ENDCAP_RATE_LIMIT_CATALOG=1000000/1s" \
			bench_dev_start "$server" "$(realpath -m "$ENDCAP_DEV_DIR")" "$PORT_BASE" "$log" $DEV_FLAGS
		sampled+=("endcap=$DEV_PID")
	else
		dt=()
		if bench_has_flag demo-traffic "$server" dev; then dt=(--demo-traffic=false); fi
		# shellcheck disable=SC2086 # DEV_FLAGS is a list of flags
		# shellcheck disable=SC2086 # API_ENV is a list of NAME=value words
		env $API_ENV ENDCAP_RATE_LIMIT_DEFAULT=1000000/1s ENDCAP_RATE_LIMIT_CATALOG=1000000/1s \
			"$server" dev --target "$target" --kfake="$kfake" "${dt[@]}" $DEV_FLAGS > "$log" 2>&1 &
		pids+=($!)
		sampled+=("endcap=$!")
	fi
	logs+=("endcap=$log")
	# A catalog of a million products is rebuilt from the log at start: allow minutes.
	wait_ready "$URL" 600 || { echo "endcap dev did not become ready; see $log" >&2; exit 1; }
	if [ "$SPLIT" = 1 ]; then
		plog="$ENDCAP_DEV_DIR/logs/bench-auctions-projector.log"
		echo "starting endcap serve --target projector on $PROJECTOR_ADDR (log: $plog)"
		# The dev stack listens on the configuration's default addresses, and the
		# resolvedBidId keys are shared through its Redis.
		ENDCAP_HTTP_ADDR="$PROJECTOR_ADDR" "$server" serve --target projector > "$plog" 2>&1 &
		pids+=($!)
		projector_pid=$!
		sampled+=("projector=$!")
		logs+=("projector=$plog")
		wait_ready "http://$PROJECTOR_ADDR" 600 || { echo "the projector did not become ready; see $plog" >&2; exit 1; }
	fi
fi

cred() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$CREDENTIALS" "$1"; }
marketplace=$(cred marketplaceId)

# Seed once: skip when the manifest is complete, of this marketplace and of these counts.
seeded=$(python3 - "$MANIFEST" "$marketplace" "$SEED_VENDORS" "$SEED_PRODUCTS" "$SEED_CAMPAIGNS" "$SEED_CAPPED_PERCENT" <<'PY'
import json, sys
try:
    m = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print(0); sys.exit()
ok = (m.get("complete") and m.get("marketplaceId") in ("", sys.argv[2])
      and [m.get("vendors"), m.get("products"), m.get("campaigns")] == [int(x) for x in sys.argv[3:6]]
      and (sys.argv[6] == "0" or "caps-" + sys.argv[6] in m.get("phases", [])))
print(1 if ok else 0)
PY
)
if [ "$seeded" = 1 ]; then
	echo "seed: using $MANIFEST"
else
	# The seed's ~1.4 M writes need the raised limits; the default 45 requests per 2 s would take days.
	adv=$(cred advancedKey)
	limit=1000000000
	for path in catalog-search-service/catalogs/categories campaign-service/vendors/v-0/campaigns; do
		l=$(curl -sS -o /dev/null -D - -H "Authorization: Bearer $adv" "$URL/public/v1/$path?limit=1" 2>/dev/null |
			tr -d '\r' | awk -F': ' 'tolower($1) == "x-ratelimit-limit" {print $2}') || true
		[ -n "$l" ] && [ "$l" -lt "$limit" ] && limit=$l
	done
	if [ "$limit" -lt 10000 ]; then
		echo "Endcap at $URL allows $limit requests per period and key on /public/v1: restart it with" >&2
		echo "  ENDCAP_RATE_LIMIT_DEFAULT=1000000/1s ENDCAP_RATE_LIMIT_CATALOG=1000000/1s make run" >&2
		exit 1
	fi
	echo "seed: $SEED_VENDORS vendors, $SEED_PRODUCTS products, $SEED_CAMPAIGNS campaigns"
	"$bin" loadgen seed --url "$URL" --credentials "$CREDENTIALS" --manifest "$MANIFEST" \
		--vendors "$SEED_VENDORS" --products "$SEED_PRODUCTS" --campaigns "$SEED_CAMPAIGNS" \
		--concurrency "$SEED_CONCURRENCY" --capped-percent "$SEED_CAPPED_PERCENT"
fi

if [ "$BARE" = 1 ]; then
	"$bin" loadgen bare --addr "$BARE_ADDR" 2>/dev/null &
	pids+=($!)
	sleep 0.5
fi

check=()
[ "$CHECK" = 1 ] && check=(--check)
out=$(mktemp -d)
echo "reports: $out"
if [ ${#sampled[@]} -gt 0 ]; then
	# Per-second CPU of the processes started here and their children (ClickHouse, Redis...), for the
	# timeline printed at the end.
	python3 deploy/local/sample-cpu.py "$out/cpu.tsv" "${sampled[@]}" &
	pids+=($!)
fi
if [ "$WARMUP" != 0 ]; then
	# Not counted: a process just started is still collecting what the rebuild of its views left.
	$LOADGEN_PREFIX "$bin" loadgen auctions --url "$URL" --credentials "$CREDENTIALS" --manifest "$MANIFEST" \
		--duration "$WARMUP" --concurrency "$CONCURRENCY" --rate "$RATE" --ids "$IDS" \
		--slots "$SLOTS" --bid-share "$BID_SHARE" --zipf "$ZIPF" --shoppers "$SHOPPERS" --json > "$out/warmup.json"
	python3 - "$out/warmup.json" "$WARMUP" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"warm-up ({sys.argv[2]}, not counted) endcap auctions/s {d['auctions_per_sec']:.0f}  p50 {d['p50_ms']:.2f}"
      f"  p99 {d['p99_ms']:.2f}  max {d['max_ms']:.2f} ms")
PY
fi
targets=(endcap)
[ "$BARE" = 1 ] && targets+=(bare)
for mode in $MODES; do
	rate="$RATE"; [ "$mode" = closed ] && rate=0
	for r in $(seq 1 "$ROUNDS"); do
		for target in "${targets[@]}"; do
			u="$URL"; [ "$target" = bare ] && u="http://$BARE_ADDR"
			if [ "$target" = endcap ]; then python3 deploy/local/server-latency.py snapshot "$URL" /v2/auctions "$out/$mode-server-$r.json"; fi
			pause=0
			if [ "$target" = endcap ] && [ "$PAUSE_PROJECTOR" = 1 ] && [ -n "$projector_pid" ]; then pause=1; kill -STOP "$projector_pid"; fi
			$LOADGEN_PREFIX "$bin" loadgen auctions --url "$u" --credentials "$CREDENTIALS" --manifest "$MANIFEST" \
				--duration "$DURATION" --concurrency "$CONCURRENCY" --rate "$rate" --ids "$IDS" \
				--slots "$SLOTS" --bid-share "$BID_SHARE" --zipf "$ZIPF" --shoppers "$SHOPPERS" "${check[@]}" --json > "$out/$mode-$target-$r.json"
			if [ "$pause" = 1 ]; then kill -CONT "$projector_pid"; fi
			python3 - "$mode" "$target" "$r" "$out/$mode-$target-$r.json" <<'PY'
import json, sys
mode, t, r, p = sys.argv[1:5]
d = json.load(open(p))
warn = f"  UNSENT {d['unsent']}" if d["unsent"] else ""
print(f"{mode:6s} round {r} {t:7s} auctions/s {d['auctions_per_sec']:>8.0f}  p50 {d['p50_ms']:7.2f}  p90 {d['p90_ms']:7.2f}"
      f"  p99 {d['p99_ms']:7.2f}  max {d['max_ms']:7.2f} ms  winners/auction {d['winners_per_auction']:5.2f}"
      f"  ok {d['ok']} failed {d['failed']} bad {d['bad_answers']}{warn}")
if d.get("first_error"):
    print(f"    first error: {d['first_error'][:200]}")
if d.get("first_bad_answer"):
    print(f"    first bad answer: {d['first_bad_answer'][:200]}")
PY
			if [ "$target" = endcap ]; then python3 deploy/local/server-latency.py report "$URL" /v2/auctions "$out/$mode-server-$r.json"; fi
		done
	done
done
python3 - "$out" "$ROUNDS" "$RATE" "$SUMMARY" "$LABEL" <<'PY'
import json, os, statistics, sys
out, rounds, rate, summary, run_label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
keys = ("auctions_per_sec", "p50_ms", "p90_ms", "p99_ms", "winners_per_auction")
res = {"label": run_label}
for mode, label in (("open", f"open loop at {rate}/s"), ("closed", "closed loop")):
    med = {}
    for t in ("endcap", "bare"):
        paths = [f"{out}/{mode}-{t}-{r}.json" for r in range(1, rounds + 1)]
        if not all(os.path.exists(p) for p in paths):
            continue  # a mode or target not run (MODES, BARE)
        runs = [json.load(open(p)) for p in paths]
        med[t] = {k: statistics.median(x[k] for x in runs) for k in keys}
        m = med[t]
        print(f"median {label:22s} {t:7s} auctions/s {m['auctions_per_sec']:>8.0f}  p50 {m['p50_ms']:7.2f}"
              f"  p90 {m['p90_ms']:7.2f}  p99 {m['p99_ms']:7.2f} ms  winners/auction {m['winners_per_auction']:5.2f}")
    e, b = med.get("endcap"), med.get("bare")
    if e:
        res[mode] = e
    if e and b and b["auctions_per_sec"] > 0 and b["p99_ms"] > 0:
        print(f"{label}: endcap/bare throughput {e['auctions_per_sec'] / b['auctions_per_sec']:.2f}, p99 {e['p99_ms'] / b['p99_ms']:.1f}x")
if summary and len(res) > 1:
    with open(summary, "a") as f:
        f.write(json.dumps(res) + "\n")
PY
if [ ${#sampled[@]} -gt 0 ] && [ -n "$MODES" ]; then
	# Where the open-loop rounds' slow requests were (more than 1 % of a second's requests slower than 10 ms),
	# beside each process's CPU in that second and the Go collections under way (with GODEBUG=gctrace=1).
	echo "slow seconds of the open-loop rounds:"
	python3 deploy/local/auction-timeline.py "$out" "$out/cpu.tsv" "${logs[@]}"
fi
