#!/usr/bin/env bash
# Runs the chaos tests longer than CI does, several times, and prints a short
# report: how often each case passed, and how many requests had to wait for
# Redis during a fault (the rest the store's circuit answered at once).
#
# Redis part: gateway TestRedisChaos (Redis blackholed, slowed, reset and
# killed behind internal/chaosproxy, for each store.redis.on_error choice,
# on both engines), the store's own outage tests in ratelimit/redisstore,
# and the proxy's tests.
#
#   scripts/chaos.sh        # COUNT=5 REQUESTS=200 by default
#
# COUNT is go test's -count; REQUESTS is how many requests each worker sends
# during a fault (SLUICE_CHAOS_REQUESTS; CI sends 20). Needs redis-server
# (installed from Debian's packages when missing). Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-5}
REQUESTS=${REQUESTS:-200}
if ! command -v redis-server >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
export SLUICE_REQUIRE_REDIS=1 SLUICE_CHAOS_REQUESTS=$REQUESTS
log=$(mktemp -t sluice-chaos.XXXXXX)
status=0
run() { # package, test pattern
	echo "== go test -race -count=$COUNT -run '$2' $1" | tee -a "$log"
	go test -race -count="$COUNT" -timeout 60m -v -run "$2" "$1" >>"$log" 2>&1 || status=1
}
start=$(date +%s)
run ./internal/chaosproxy/ '.'
run ./ratelimit/redisstore/ 'TestOutage|TestTimeoutOpensCircuit|TestCallerCancelIsNotAFailure'
run ./gateway/ 'TestRedisChaos'

echo
echo "sluice chaos: COUNT=$COUNT REQUESTS=$REQUESTS, $(($(date +%s) - start))s, log in $log"
# Every leaf test and subtest: runs, failures, slowest run.
awk '
	/^ *--- (PASS|FAIL): / {
		name = $3; secs = $4; gsub(/[()s]/, "", secs)
		runs[name]++
		if ($2 == "FAIL:") fails[name]++
		if (secs + 0 > slowest[name]) slowest[name] = secs + 0
	}
	/chaos TestRedisChaos\/[^:]*: [0-9]+ of [0-9]+ requests waited/ {
		for (i = 1; i <= NF; i++) if ($i == "chaos") { name = $(i + 1); sub(/:$/, "", name); w = $(i + 2); n = $(i + 4) }
		waited[name] += w; sent[name] += n
	}
	END {
		printf "%-48s %5s %5s %8s %s\n", "test", "runs", "fails", "slowest", "waited for Redis"
		for (name in runs) {
			if (name ~ /^TestRedisChaos(\/(loop|goroutine))?$/) continue # parents of the cases
			extra = ""
			if (name in sent) extra = sprintf("%d of %d (%.1f%%)", waited[name], sent[name], 100 * waited[name] / sent[name])
			printf "%-48s %5d %5d %7.2fs %s\n", name, runs[name], fails[name], slowest[name], extra | "sort"
		}
	}
' "$log"
if [ $status -ne 0 ]; then
	echo
	echo "FAILURES:"
	grep -E '^\s*(--- FAIL|FAIL|panic:|\S+_test\.go:[0-9]+: )' "$log" | grep -v 'requests waited for Redis' | head -40
fi
exit $status
