#!/usr/bin/env bash
# Installs what Endcap's local stack (deploy/localstack) needs on a Debian machine, and nothing that is
# already there:
#   - clickhouse-server + clickhouse-client (Debian's 18.16) and redis-server, with apt-get (as root, or
#     through sudo);
#   - versitygw, built from the version pinned in tools/go.mod into .endcap/bin/versitygw;
#   - nodejs and npm with apt-get when the `node` or `npm` command is missing, and maildev (npm, version
#     pinned below) into .endcap/maildev: the local stack's SMTP server and inbox (the console's
#     invitation e-mails);
#   - jq and python3 when missing (the guide, docs/guide, uses them);
# and, with --test (make test), what only the tests need:
#   - zookeeper (Debian's 3.8, with a Java runtime), for the replicated ClickHouse cluster that
#     deploy/localstack starts for the cluster tests (Options.ClickHouseReplicas);
#   - chromium (Debian's) and playwright-core (npm, pinned below) into .endcap/playwright, for the
#     console's browser tests (e2e/console_test.go): playwright drives Debian's browser, never one of its own;
#   - chDB (a current ClickHouse as a library, for the two-engine tests: docs/design/clickhouse.md), the npm
#     package chdb (version pinned below) into .endcap/chdb, whose @chdb/lib-linux-x64-gnu ships libchdb.so;
#   - prometheus (Debian's 2.42, with promtool), for the monitoring kit's tests (deploy/monitoring);
#   - valgrind (Debian's), whose callgrind counts the instructions of the performance budget tests
#     (testkit/perfbudget, docs/design/performance.md).
# Idempotent and silent when everything is present; prints one line per thing it installs.
# The stack runs its own ClickHouse and Redis processes with its own config; the system services these
# packages come with are never used, and are stopped and disabled right after this script installs them.
set -euo pipefail

tests=0
case "${1:-}" in
--test) tests=1 ;;
"") ;;
*) printf 'usage: %s [--test]\n' "$0" >&2; exit 2 ;;
esac

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

say() { printf 'install.sh: %s\n' "$*"; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -eq 0 ]; then
	as_root() { "$@"; }
elif command -v sudo >/dev/null 2>&1; then
	as_root() { sudo -n env DEBIAN_FRONTEND=noninteractive "$@"; }
else
	as_root() { die "need root to run: $*"; }
fi

apt_log="$(mktemp -t endcap-install.XXXXXX)"
trap 'rm -f "$apt_log"' EXIT

# Runs a command with its output in $apt_log, which is shown only if it fails.
quietly() {
	if ! "$@" >>"$apt_log" 2>&1; then
		cat "$apt_log" >&2
		die "failed: $*"
	fi
}

installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }

apt_updated=0
# apt_install [apt-get options...] -- packages...: installs those packages that are missing.
apt_install() {
	local opts=() pkgs=() p
	while [ "$#" -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	for p in "$@"; do installed "$p" || pkgs+=("$p"); done
	[ "${#pkgs[@]}" -gt 0 ] || return 0
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install ${pkgs[*]} by hand"
	say "installing ${pkgs[*]} (apt-get)"
	if [ "$apt_updated" -eq 0 ]; then
		quietly as_root apt-get update -q
		apt_updated=1
	fi
	quietly as_root apt-get install -y -q "${opts[@]}" "${pkgs[@]}"
	newly_installed+=("${pkgs[@]}")
}

newly_installed=()
apt_install -- clickhouse-server clickhouse-client
apt_install --no-install-recommends -- redis-server
# node and npm, for maildev (the stack's inbox), the official JS SDK end-to-end test (e2e/sdk_test.go), the
# browser tests and chDB, only when the command is missing: a node from elsewhere (nodesource's nodejs
# package ships npm itself) is left alone.
command -v node >/dev/null 2>&1 || apt_install --no-install-recommends -- nodejs
command -v npm >/dev/null 2>&1 || apt_install --no-install-recommends -- npm
# The guide (docs/guide, run by e2e/TestGuide) uses jq, and python3 for its webhook receiver.
command -v jq >/dev/null 2>&1 || apt_install --no-install-recommends -- jq
command -v python3 >/dev/null 2>&1 || apt_install --no-install-recommends -- python3
if [ "$tests" -eq 1 ]; then
	# The test cluster's ZooKeeper runs as a child of the tests with a configuration of its own
	# (zkServer.sh start-foreground); the package's own service is never started.
	apt_install --no-install-recommends -- zookeeper
	# Prometheus and promtool, for the monitoring kit's tests (deploy/monitoring, e2e/monitoring_test.go).
	command -v promtool >/dev/null 2>&1 || apt_install --no-install-recommends -- prometheus
	# The browser of the console's tests (headless, driven by playwright-core).
	[ -x /usr/bin/chromium ] || apt_install --no-install-recommends -- chromium
	# callgrind, for the instruction budgets of the performance tests.
	command -v valgrind >/dev/null 2>&1 || apt_install --no-install-recommends -- valgrind
fi

# Packaged services we just installed would hold the default ports (9000/8123/9009, 6379, 9090) and memory;
# the stack never uses them. Left alone when the package was already installed: that is the owner's.
for p in "${newly_installed[@]}"; do
	case "$p" in clickhouse-server | redis-server | zookeeper | prometheus) ;; *) continue ;; esac
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		as_root systemctl disable --now "$p" >/dev/null 2>&1 || true
	elif command -v service >/dev/null 2>&1; then
		as_root service "$p" stop >/dev/null 2>&1 || true
	fi
done

# versitygw, built from tools/go.mod when missing or older than the pin.
vgw="$repo_root/.endcap/bin/versitygw"
if [ ! -x "$vgw" ] || [ tools/go.mod -nt "$vgw" ] || [ tools/go.sum -nt "$vgw" ]; then
	go_bin="$(command -v go || true)"
	[ -n "$go_bin" ] || { [ -x /usr/local/go/bin/go ] && go_bin=/usr/local/go/bin/go; } || die "go not found (needed to build versitygw)"
	say "building versitygw ($(awk '$1 == "github.com/versity/versitygw" {print $2}' tools/go.mod)) into .endcap/bin/versitygw"
	mkdir -p "$(dirname "$vgw")"
	# In tools/, its own module: GOWORK=off so a go.work at the root cannot pull it into the main build.
	(cd tools && GOWORK=off "$go_bin" build -o "$vgw.tmp" github.com/versity/versitygw/cmd/versitygw) ||
		{ rm -f "$vgw.tmp"; die "building versitygw failed"; }
	mv -f "$vgw.tmp" "$vgw"
fi

# chDB: the npm package, whose platform package ships libchdb.so (ClickHouse 26.7 as a library); the
# two-engine tests (e2e/twoengines_test.go, testkit/chdb) load it through chdb-go. Installed with npm like
# the JS SDK of e2e/sdk_test.go, into a folder of the project's own (about 550 MB); skipped when that
# version is there.
chdb_version=3.4.0
chdb_dir="$repo_root/.endcap/chdb"
chdb_lib="$chdb_dir/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so"
chdb_have="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$chdb_dir/node_modules/chdb/package.json" 2>/dev/null | head -n1 || true)"
if [ "$tests" -eq 1 ] && { [ "$chdb_have" != "$chdb_version" ] || [ ! -s "$chdb_lib" ]; }; then
	case "$(uname -s)/$(uname -m)" in
	Linux/x86_64) ;;
	*) die "chDB: this script installs the linux-x64 library only (found $(uname -s)/$(uname -m))" ;;
	esac
	command -v npm >/dev/null 2>&1 || die "npm not found (needed to install chDB)"
	say "installing chdb@$chdb_version (npm) into .endcap/chdb"
	mkdir -p "$chdb_dir"
	[ -f "$chdb_dir/package.json" ] || printf '{"name":"endcap-chdb","private":true}\n' >"$chdb_dir/package.json"
	quietly npm install --prefix "$chdb_dir" --no-audit --no-fund --no-update-notifier --save-exact "chdb@$chdb_version"
	[ -s "$chdb_lib" ] || die "chdb@$chdb_version installed, but $chdb_lib is missing"
fi

# npm_pin DIR PACKAGE VERSION: installs PACKAGE@VERSION into DIR (an npm prefix of the project's own) unless
# that version is there.
npm_pin() {
	local dir="$1" pkg="$2" version="$3" have
	have="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/$pkg/package.json" 2>/dev/null | head -n1 || true)"
	[ "$have" = "$version" ] && return 0
	command -v npm >/dev/null 2>&1 || die "npm not found (needed to install $pkg)"
	say "installing $pkg@$version (npm) into ${dir#"$repo_root"/}"
	mkdir -p "$dir"
	[ -f "$dir/package.json" ] || printf '{"name":"endcap-%s","private":true}\n' "$(basename "$dir")" >"$dir/package.json"
	quietly npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --save-exact "$pkg@$version"
	[ -f "$dir/node_modules/$pkg/package.json" ] || die "$pkg@$version installed, but $dir/node_modules/$pkg is missing"
}

# maildev: the local stack's SMTP server and inbox (deploy/localstack, Options.Mail).
npm_pin "$repo_root/.endcap/maildev" maildev 3.0.0
if [ "$tests" -eq 1 ]; then
	# playwright-core: the browser tests' driver of /usr/bin/chromium (it downloads no browser).
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm_pin "$repo_root/.endcap/playwright" playwright-core 1.65.1
fi
