# Sourced by the bench scripts (bash): a private `endcap dev` on ports of its own, the peak RSS of a
# process, a build of another commit. Nothing here runs when sourced.

# bench_has_flag FLAG COMMAND...: whether `COMMAND -h` lists -FLAG (an older build may lack it).
bench_has_flag() {
	local flag=$1 usage
	shift
	usage=$("$@" -h 2>&1 || true) # -h exits 2 (and grep -q would end the pipe early under pipefail)
	grep -qE -- "^  -$flag( |$)" <<< "$usage"
}

# bench_dev_start BIN DIR PORT_BASE LOG [FLAGS...]: starts `BIN dev` with its data in DIR (the caller makes it
# fresh) and every port from PORT_BASE: the API on PORT_BASE, Kafka +1, ClickHouse +2 (HTTP +3), Redis +4,
# S3 +5, the inbox's SMTP +6 and web +7; no demo traffic (where BIN has the flag). Waits until it is ready and
# has written its credentials (at most 600 s). Sets DEV_PID (the process that serves the API), DEV_URL,
# DEV_CH_HTTP (ClickHouse's HTTP URL) and DEV_CREDENTIALS. The environment's BENCH_DEV_ENV (NAME=value words)
# is given to that process alone.
bench_dev_start() {
	local bin=$1 dir=$2 base=$3 log=$4
	shift 4
	local extra=()
	if bench_has_flag demo-traffic "$bin" dev; then extra+=(--demo-traffic=false); fi
	DEV_URL="http://127.0.0.1:$base" DEV_CH_HTTP="http://127.0.0.1:$((base + 3))" DEV_CREDENTIALS="$dir/dev/credentials.json"
	mkdir -p "$dir"
	# shellcheck disable=SC2086 # BENCH_DEV_ENV is a list of NAME=value words
	env ${BENCH_DEV_ENV:-} "$bin" dev --dir "$dir" --http-addr "127.0.0.1:$base" --kafka-brokers "127.0.0.1:$((base + 1))" \
		--clickhouse-addr "127.0.0.1:$((base + 2))" --clickhouse-http-port "$((base + 3))" \
		--redis-addr "127.0.0.1:$((base + 4))" --s3-endpoint "http://127.0.0.1:$((base + 5))" \
		--mail-smtp-port "$((base + 6))" --mail-web-port "$((base + 7))" "${extra[@]}" "$@" > "$log" 2>&1 &
	DEV_PID=$!
	local i
	for ((i = 0; i < 600; i++)); do
		if ! kill -0 "$DEV_PID" 2>/dev/null; then
			echo "endcap dev exited before it was ready; the end of $log:" >&2
			tail -20 "$log" >&2
			DEV_PID=
			return 1
		fi
		if curl -fsS --max-time 5 "$DEV_URL/readyz" >/dev/null 2>&1 && [ -s "$DEV_CREDENTIALS" ]; then
			return 0
		fi
		sleep 1
	done
	echo "endcap dev was not ready within 600 s; see $log" >&2
	return 1
}

# bench_dev_stop: stops the endcap dev of bench_dev_start (SIGTERM: it stops its servers; SIGKILL after 60 s).
bench_dev_stop() {
	[ -n "${DEV_PID:-}" ] || return 0
	kill "$DEV_PID" 2>/dev/null || true
	local i
	for ((i = 0; i < 60; i++)); do
		kill -0 "$DEV_PID" 2>/dev/null || break
		sleep 1
	done
	if kill -0 "$DEV_PID" 2>/dev/null; then
		echo "endcap dev ($DEV_PID) did not stop within 60 s: killed" >&2
		kill -KILL "$DEV_PID" 2>/dev/null || true
	fi
	wait "$DEV_PID" 2>/dev/null || true
	DEV_PID=
}

# bench_rss_reset PID: starts PID's peak RSS (VmHWM) again from its current RSS; fails where the kernel does
# not allow it (then VmHWM is the peak since the process started).
bench_rss_reset() {
	echo 5 2>/dev/null > "/proc/$1/clear_refs"
}

# bench_rss_peak PID: PID's peak RSS in MiB (VmHWM).
bench_rss_peak() {
	awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"
}

# bench_ch_query URL SQL: runs SQL on ClickHouse's HTTP interface at URL (database endcap), deadline 60 s.
bench_ch_query() {
	curl -fsS --max-time 60 "$1/?database=${ENDCAP_CLICKHOUSE_DATABASE:-endcap}" --data-binary "$2"
}

# bench_build_commit COMMIT OUT: builds the development binary (`go build -tags dev`) of COMMIT into OUT (an
# absolute path) in a temporary worktree, removed after. Does nothing when OUT exists.
bench_build_commit() {
	local commit=$1 out=$2 wt rc=0
	[ -x "$out" ] && return 0
	wt=$(mktemp -d "${TMPDIR:-/tmp}/endcap-base.XXXXXX")
	git worktree add --detach "$wt" "$commit" >/dev/null || return 1
	(cd "$wt" && env -u GODEBUG go build -tags dev -o "$out" ./cmd/endcap) || rc=1
	git worktree remove --force "$wt"
	return $rc
}
