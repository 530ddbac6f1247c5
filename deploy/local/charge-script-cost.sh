#!/usr/bin/env bash
# The charge script's Redis CPU (docs/design/performance.md, Events fold: catch-up): runs
# spend's TestChargeScriptCost against a redis-server of its own under valgrind --tool=callgrind
# (the local stack's settings: AOF on), one mix at a time, and prints the instructions Redis ran
# for the measured half of the mix (10,000 items, after 10,000 that warm the hashes up), in all
# and an item. The instructions do not depend on the machine's load.
#   MIX: catch-up (default: impression records and clicks refused at spent daily budgets, one marker
#   hash a campaign's hour, as in the catch-up of a new stack), sized (the same with 4,096 marker hashes a
#   campaign's hour, as for a steady rate) or applied (impression records, valid clicks and CPM charges,
#   applied)
# Needs valgrind and redis-server (deploy/local/install.sh --test).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MIX="${MIX:-catch-up}"
dir=$(mktemp -d)
vpid=""
cleanup() {
	[ -n "$vpid" ] && kill "$vpid" 2>/dev/null && wait "$vpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" redis-server --bind 127.0.0.1 --port "$port" \
	--dir "$dir" --appendonly yes --appendfsync everysec --save "" --daemonize no --set-proc-title no >"$dir/log" 2>&1 &
vpid=$!
for _ in $(seq 120); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.5
done
ENDCAP_CHARGE_COST_ADDR="127.0.0.1:$port" ENDCAP_CHARGE_COST_PID="$vpid" ENDCAP_CHARGE_COST_MIX="$MIX" \
	go test -count=1 -run '^TestChargeScriptCost$' -v ./spend | grep -E 'charge_cost_test|^(ok|FAIL|---)' || true
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$vpid" || true
vpid=""
# The dump the test asked for (callgrind_control -d): the counts since it zeroed them.
ir=$(awk '/^totals:/ {print $2}' "$dir/callgrind.out.1")
echo "$MIX: $ir instructions, $((ir / 10000)) an item"
