#!/usr/bin/env bash
# Plays the hostile clients of the hardening issue against `sluice serve`,
# on each engine, and reports the gateway's memory around each attack (its
# resident set, VmRSS, and its peak, VmHWM, from /proc): a client that
# pipelines without reading, a flood of distinct rate-limit keys beside a
# victim on an IP-keyed route, and clients that stop reading a large
# answer. Loopback only; every attack is bounded (bench/cmd/hostile).
#
#   scripts/hostile.sh               # PIPELINE=256MiB KEYS=1000000 SLOWREAD=64 by default
#
# Not run in CI (it takes minutes); the tests hold the same properties at a
# smaller scale.
set -euo pipefail
cd "$(dirname "$0")/.."
PIPELINE=${PIPELINE:-256MiB}
KEYS=${KEYS:-1000000}
SLOWREAD=${SLOWREAD:-64}
HOLD=${HOLD:-75s}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
go build -o "$work/sluice" ./cmd/sluice
(cd bench && go build -o "$work/hostile" ./cmd/hostile)
UP=$(free_port)
"$work/hostile" -upstream -addr "127.0.0.1:$UP" & pids+=($!)

mem() { awk '/^VmRSS|^VmHWM/ {printf "%s %d MiB  ", $1, $2/1024}' "/proc/$1/status"; }

for engine in loop goroutine; do
	SL=$(free_port); ADM=$(free_port)
	cat >"$work/sluice-$engine.yaml" <<YAML
listen: 127.0.0.1:$SL
admin: {listen: 127.0.0.1:$ADM}
log: {level: error}
server: {engine: $engine}
upstreams:
  up: {targets: ["http://127.0.0.1:$UP"]}
routes:
  - name: keyed
    match: {path_prefix: /keyed/}
    upstream: up
    policies:
      rate_limit: {algorithm: token_bucket, limit: 100, period: 1s, key: "header:X-Api-Key"}
  - name: ip
    match: {path_prefix: /ip/}
    upstream: up
    policies:
      rate_limit: {algorithm: token_bucket, limit: 1000, period: 1s, key: ip}
  - {name: all, upstream: up}
YAML
	"$work/sluice" serve --config "$work/sluice-$engine.yaml" --watch=false 2>"$work/sluice-$engine.log" &
	gw=$!; pids+=($gw)
	for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$SL/" && break; sleep 0.1; done
	echo "== engine $engine: at start: $(mem $gw)"
	"$work/hostile" -addr "127.0.0.1:$SL" -attack pipeline -bytes "$PIPELINE"
	echo "   after the pipeliner: $(mem $gw)"
	"$work/hostile" -addr "127.0.0.1:$SL" -attack keyflood -keys "$KEYS" -path /keyed/ -victim /ip/
	echo "   after the key flood: $(mem $gw)"
	"$work/hostile" -addr "127.0.0.1:$SL" -attack slowread -conns "$SLOWREAD" -path /large -hold "$HOLD"
	echo "   after the slow readers: $(mem $gw)"
	kill "$gw"; wait "$gw" 2>/dev/null || true
done
