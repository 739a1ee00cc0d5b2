#!/usr/bin/env bash
# Measures sluice's gateway against nginx and a plain httputil.ReverseProxy in
# one run, beside the gateway on its goroutine engine alone (server.engine)
# and two ceilings: the least proxy fasthttp (the goroutine engine) can make
# (bench/cmd/fasthttpproxy), and the least event-loop proxy of nginx's
# design in Go (bench/cmd/gnetproxy, a measuring tool that parses almost
# nothing; the default engine's loops are of this design). Same upstream (an
# nginx instance answering a small body), same load, loopback only. sluice
# runs with a rate limit, a circuit breaker and an adaptive concurrency
# limit on the route. Each proxy is measured ROUNDS times, interleaved,
# twice: at saturation (wrk, one thread, CONNS connections: throughput) and
# at a fixed RATE of requests per second that every proxy can carry
# (bench/cmd/fixedrate, open loop: the latency a proxy adds). Medians are
# reported, and the ratios to nginx as the median and range of each
# round's ratio (the proxies of a round run back to back, so pairing them
# cancels much of the drift of a shared machine between rounds).
#
#   scripts/loadtest.sh            # ROUNDS=3 DURATION=10s CONNS=64 RATE=10000 by default
#   BASELINE=HEAD~5 scripts/loadtest.sh   # also the gateway built from that revision, interleaved
#   DASHBOARD=1 scripts/loadtest.sh       # also sluice with its dashboard open, interleaved
#   PROXIES="nginx sluice" DASHBOARD=1 scripts/loadtest.sh   # only these (and the dashboard run)
#   TRACING=1 scripts/loadtest.sh         # also sluice tracing at sample 0.01 and at 1.0, interleaved
#   TLS=0 scripts/loadtest.sh      # without the TLS rounds
#   H2CEILING=1 scripts/loadtest.sh       # also HTTP/2 rounds beside net/http's own ceilings
#   ONLY=tls scripts/loadtest.sh   # the TLS rounds alone (no plaintext ones)
#   H2=0 scripts/loadtest.sh       # the TLS rounds without HTTP/2 (h2load)
#   H2C=1 scripts/loadtest.sh      # also h2c rounds: nginx, sluice, sluice with server.http2.loops
#   ONLY=h2c H2C=1 scripts/loadtest.sh    # the h2c rounds alone
#   H2TLS=1 scripts/loadtest.sh    # the TLS rounds' HTTP/2 also on the loops (server.http2.loops), with CPU per request
#   ONLY=tls H2TLS=1 PERF=1 scripts/loadtest.sh   # those rounds alone, and a profile of the loops' HTTP/2 over TLS
#   ONLY=tls H2=0 COUNTS=1 scripts/loadtest.sh    # HTTPS HTTP/1.1 alone, with what each request costs the proxy
#   NGINX_BATCH=1 scripts/loadtest.sh     # the nginx proxy's workers under SCHED_BATCH, as sluice serve runs its threads
#
# With H2C=1, HTTP/2 without TLS (prior knowledge, h2load's default for
# http:// URLs) is measured in rounds of its own, interleaved: nginx
# (listen ... http2 on a plaintext port, with reuseport: without it one of
# its workers took most of h2load's few connections, where the loops take
# turns), sluice (whose plaintext listener
# hands h2c to net/http's HTTP/2 server) and sluice-h2loops, the same
# gateway with h2c served on its event loops (server.http2.loops, an
# experiment), each at saturation with h2load as the TLS rounds run it,
# then in the same rounds over a fixed H2N requests (default 40000), where
# the CPU time the proxy's processes spent (user and system, from /proc;
# nginx's workers) is counted: CPU per request depends less on what else
# the machine runs than requests per second do. PERF=1 adds a CPU profile
# of sluice-h2loops (perf record during a saturated run after the rounds;
# the share of kernel and user time, and the gateway's top symbols).
#
# Then, unless TLS=0, nginx and sluice (the default engine's gateway) each
# terminate TLS with the same certificate (a self-signed ECDSA P-256 one,
# made for the run) in front of the same upstream, and are measured
# ROUNDS times, interleaved: HTTPS HTTP/1.1 keep-alive at saturation (wrk,
# CONNS connections) and HTTP/2 at saturation (h2load, CONNS concurrent
# streams as CONNS/STREAMS connections of STREAMS streams each, so that
# both keep as many requests in flight; h2load has no p99, its latency
# column is the mean). nginx's TLS listener has reuseport, as its h2c one.
#
# With H2TLS=1, the TLS rounds' HTTP/2 is measured on a third gateway too,
# sluice-h2loops (the same gateway with server.http2.loops: its HTTP/2
# over TLS served on the event loops, not on net/http's HTTP/2 server),
# right after sluice in every round, and each of nginx, sluice and
# sluice-h2loops is then measured over a fixed H2N HTTP/2 requests over
# TLS, counting the CPU time its processes spent as the h2c rounds do;
# PERF=1 then profiles sluice-h2loops under HTTP/2 over TLS as well.
#
# With COUNTS=1, every TLS round also loads nginx and sluice (and the
# baseline) with H1N HTTPS HTTP/1.1 requests (default 40000; h2load --h1,
# CONNS connections) and counts, per request, what the proxy's processes
# spent and did: CPU time (user and system, from /proc), context switches
# (all threads, from /proc) and, when perf can count system calls, futex
# calls (the Go runtime handing its Ps and threads to each other),
# nanosleep calls (its monitor thread's naps), epoll_wait calls and all
# system calls. Counts move less with the machine's other load than
# requests per second do, and say where a difference comes from.
#
# With BASELINE, sluice as built from that git revision runs beside the
# working tree's, on the same configuration, in every round (the TLS ones
# too, on a TLS listener of its own): a change's cost is its paired ratio
# to the baseline, whatever the machine does.
#
# With DASHBOARD=1, the same sluice gateway is measured a second time in
# every round with a viewer of its dashboard attached (the page's event
# stream, GET /dashboard/events on the admin listener, read for the whole
# measurement), and the report adds that run's paired ratio to sluice's
# without one: the dashboard's cost. PROXIES restricts the run to the
# proxies it names (nginx, sluice, sluice-goroutine, fasthttp, gnet,
# reverseproxy); ratios to nginx need nginx among them.
#
# With TRACING=1, two more copies of the gateway run with tracing on, at
# sample 0.01 and at sample 1.0 (sluice-trace-0.01, sluice-trace-1),
# exporting to bench/cmd/otlpsink (an OTLP/HTTP collector that drops what
# it receives), right after sluice in every round; the report adds their
# paired ratios to sluice's, with tracing off.
#
# Needs wrk, nginx, openssl and, for HTTP/2, h2load (installed from
# Debian's packages when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
RATE=${RATE:-10000}
TLS=${TLS:-1}
ONLY=${ONLY:-}
H2=${H2:-1}
STREAMS=${STREAMS:-8}
for bin in wrk nginx openssl h2load; do
	if ! command -v $bin >/dev/null; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx openssl nghttp2-client >/dev/null
	fi
done
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for pid in "$work/nginx.pid" "$work/upstream.pid"; do
		[ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
	done
	rm -rf "$work"
	git worktree prune 2>/dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
UP=$(free_port); NGX=$(free_port); RP=$(free_port); SL=$(free_port); ADM=$(free_port); FH=$(free_port); GN=$(free_port)
SLG=$(free_port); ADMG=$(free_port); SLB=$(free_port); ADMB=$(free_port)
SLT1=$(free_port); ADMT1=$(free_port); SLT100=$(free_port); ADMT100=$(free_port); OTLP=$(free_port)
NGXS=$(free_port); SLS=$(free_port); SLBS=$(free_port)
NGXC=$(free_port); SLC=$(free_port); ADMC=$(free_port); SLCS=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

# The upstream and the nginx proxy are separate nginx instances, so that the
# proxy under test never shares its worker processes with the upstream.
cat >"$work/upstream.conf" <<NGINX
worker_processes auto;
pid $work/upstream.pid;
error_log $work/upstream-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  server { listen 127.0.0.1:$UP; location / { return 200 "hello from the upstream\n"; } }
}
NGINX
cat >"$work/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream up { server 127.0.0.1:$UP; keepalive 256; }
  server { listen 127.0.0.1:$NGX; location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  server {
    listen 127.0.0.1:$NGXS ssl http2 reuseport;
    ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m;
    keepalive_requests 1000000;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$NGXC http2 reuseport;
    keepalive_requests 1000000;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
nginx -c "$work/upstream.conf"
# sluice serve runs its threads under SCHED_BATCH (--batch-scheduling);
# NGINX_BATCH=1 gives the nginx proxy (not the upstream) the same policy,
# for a comparison in which neither proxy's woken workers preempt the load.
if [ -n "${NGINX_BATCH:-}" ]; then
	chrt --batch 0 nginx -c "$work/nginx.conf"
else
	nginx -c "$work/nginx.conf"
fi

cat >"$work/sluice.yaml" <<YAML
listen: 127.0.0.1:$SL
admin: {listen: 127.0.0.1:$ADM}
log: {level: error}
server: {http2: {loops: false}}
tls: {listen: 127.0.0.1:$SLS, certificates: [{cert_file: $work/cert.pem, key_file: $work/key.pem}]}
upstreams:
  up: {targets: ["http://127.0.0.1:$UP"]}
routes:
  - name: all
    upstream: up
    policies:
      rate_limit: {algorithm: gcra, limit: 100000000, period: 1s, key: ip}
      circuit_breaker: {failure_rate: 0.5, window: {kind: count, size: 100}}
      concurrency: {adaptive: {algorithm: default, min: 16, max: 1024, initial: 256}}
YAML
# The same gateway on its goroutine engine alone (server.engine), for the
# event loops' share of the difference.
sed -e "s/^listen: .*/listen: 127.0.0.1:$SLG/" -e "s/^admin: .*/admin: {listen: 127.0.0.1:$ADMG}/" -e "/^tls: /d" \
	-e "s/^server: .*/server: {engine: goroutine}/" "$work/sluice.yaml" >"$work/sluice-goroutine.yaml"
go build -o "$work/sluice" ./cmd/sluice
# The same gateway with h2c and HTTP/2 over TLS on its event loops
# (server.http2.loops).
sed -e "s/^listen: .*/listen: 127.0.0.1:$SLC/" -e "s/^admin: .*/admin: {listen: 127.0.0.1:$ADMC}/" \
	-e "s/^tls: {listen: 127.0.0.1:$SLS,/tls: {listen: 127.0.0.1:$SLCS,/" \
	-e "s/^server: .*/server: {http2: {loops: true}}/" "$work/sluice.yaml" >"$work/sluice-h2loops.yaml"
if [ -n "${TRACING:-}" ]; then
	for t in "1 0.01 $SLT1 $ADMT1" "100 1.0 $SLT100 $ADMT100"; do
		set -- $t
		sed -e "s/^listen: .*/listen: 127.0.0.1:$3/" -e "s/^admin: .*/admin: {listen: 127.0.0.1:$4}/" -e "/^tls: /d" \
			-e "s|^log: .*|&\ntracing: {endpoint: \"http://127.0.0.1:$OTLP\", sample: $2}|" "$work/sluice.yaml" >"$work/sluice-trace$1.yaml"
	done
fi
if [ -n "${BASELINE:-}" ]; then
	git worktree add -q --detach "$work/baseline" "$BASELINE"
	(cd "$work/baseline" && go build -o "$work/sluice-baseline" ./cmd/sluice)
	git worktree remove --force "$work/baseline"
	sed -e "s/^listen: .*/listen: 127.0.0.1:$SLB/" -e "s/^admin: .*/admin: {listen: 127.0.0.1:$ADMB}/" \
		-e "s/^tls: {listen: 127.0.0.1:$SLS,/tls: {listen: 127.0.0.1:$SLBS,/" "$work/sluice.yaml" >"$work/sluice-baseline.yaml"
fi
(cd bench && go build -o "$work/reverseproxy" ./cmd/reverseproxy && go build -o "$work/fasthttpproxy" ./cmd/fasthttpproxy && go build -o "$work/gnetproxy" ./cmd/gnetproxy && go build -o "$work/fixedrate" ./cmd/fixedrate && go build -o "$work/otlpsink" ./cmd/otlpsink)
"$work/sluice" serve --config "$work/sluice.yaml" --watch=false 2>"$work/sluice.log" & pids+=($!)
sluice_pid=$!
"$work/sluice" serve --config "$work/sluice-goroutine.yaml" --watch=false 2>"$work/sluice-goroutine.log" & pids+=($!)
if [ -n "${H2C:-}${H2TLS:-}" ]; then
	"$work/sluice" serve --config "$work/sluice-h2loops.yaml" --watch=false 2>"$work/sluice-h2loops.log" & pids+=($!)
	h2loops_pid=$!
fi
if [ -n "${BASELINE:-}" ]; then
	"$work/sluice-baseline" serve --config "$work/sluice-baseline.yaml" --watch=false 2>"$work/sluice-baseline.log" & pids+=($!)
	baseline_pid=$!
fi
if [ -n "${TRACING:-}" ]; then
	"$work/otlpsink" "127.0.0.1:$OTLP" >"$work/otlpsink.log" 2>&1 & pids+=($!)
	"$work/sluice" serve --config "$work/sluice-trace1.yaml" --watch=false 2>"$work/sluice-trace1.log" & pids+=($!)
	"$work/sluice" serve --config "$work/sluice-trace100.yaml" --watch=false 2>"$work/sluice-trace100.log" & pids+=($!)
fi
"$work/reverseproxy" "127.0.0.1:$RP" "http://127.0.0.1:$UP" 2>"$work/rp.log" & pids+=($!)
"$work/fasthttpproxy" "127.0.0.1:$FH" "127.0.0.1:$UP" 2>"$work/fh.log" & pids+=($!)
"$work/gnetproxy" "127.0.0.1:$GN" "127.0.0.1:$UP" 2>"$work/gn.log" & pids+=($!)
for port in $NGX $RP $SL $SLG $FH $GN ${BASELINE:+$SLB} ${TRACING:+$SLT1 $SLT100}; do
	for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
done

port_of() {
	case $1 in nginx) echo "$NGX" ;; sluice | sluice-dashboard) echo "$SL" ;; sluice-goroutine) echo "$SLG" ;; fasthttp) echo "$FH" ;; gnet) echo "$GN" ;; reverseproxy) echo "$RP" ;; sluice-baseline) echo "$SLB" ;; sluice-trace-0.01) echo "$SLT1" ;; sluice-trace-1) echo "$SLT100" ;; esac
}
names="nginx sluice ${BASELINE:+sluice-baseline} sluice-goroutine fasthttp gnet reverseproxy"
if [ -n "${PROXIES:-}" ]; then
	names="$PROXIES ${BASELINE:+sluice-baseline}"
fi
if [ -n "${TRACING:-}" ]; then # right after sluice, for the pairing
	case " $names " in
	*" sluice "*) names=" $names "; names=${names/ sluice / sluice sluice-trace-0.01 sluice-trace-1 } ;;
	*) names="$names sluice-trace-0.01 sluice-trace-1" ;;
	esac
fi
if [ -n "${DASHBOARD:-}" ]; then # right after sluice, for the pairing
	case " $names " in
	*" sluice "*) names=" $names "; names=${names/ sluice / sluice sluice-dashboard } ;;
	*) names="$names sluice-dashboard" ;;
	esac
fi
# viewing NAME runs the rest of its arguments with a dashboard viewer
# attached when NAME is sluice-dashboard: one connected (it has received
# the first event) before the command starts and closed after it ends.
viewing() {
	local name=$1; shift
	if [ "$name" != sluice-dashboard ]; then
		"$@"; return
	fi
	: >"$work/events"
	curl -sN "http://127.0.0.1:$ADM/dashboard/events" >"$work/events" & local viewer=$!
	for _ in $(seq 50); do [ -s "$work/events" ] && break; sleep 0.1; done
	[ -s "$work/events" ] || { echo "loadtest: the dashboard's event stream did not answer" >&2; kill $viewer; return 1; }
	"$@"
	kill $viewer; wait $viewer 2>/dev/null || true
	grep -q '^event: sample' "$work/events" || { echo "loadtest: the dashboard sent no sample" >&2; return 1; }
}
results="$work/results"
hz=$(getconf CLK_TCK)
# cpu_ticks NAME prints the user and system time, in clock ticks, that
# the processes serving NAME have spent (nginx: its workers).
cpu_ticks() {
	local ps
	case $1 in
	nginx) ps=$(pgrep -P "$(cat "$work/nginx.pid")") ;;
	sluice) ps=$sluice_pid ;;
	sluice-h2loops) ps=$h2loops_pid ;;
	sluice-baseline) ps=$baseline_pid ;;
	esac
	for p in $ps; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{s += $1} END {print s}'
}
# proc_pids NAME prints the processes serving NAME, comma-separated.
proc_pids() {
	case $1 in
	nginx) pgrep -P "$(cat "$work/nginx.pid")" | paste -sd, ;;
	sluice) echo "$sluice_pid" ;;
	sluice-baseline) echo "$baseline_pid" ;;
	esac
}
# switches NAME prints the context switches (voluntary and not) of every
# thread of the processes serving NAME.
switches() {
	local p
	for p in $(proc_pids "$1" | tr , ' '); do
		cat /proc/"$p"/task/*/status | awk '/^(non)?voluntary_ctxt_switches/ {s += $2} END {print s}'
	done | awk '{s += $1} END {print s}'
}
# h1_counts NAME URL loads URL with H1N HTTP/1.1 requests (h2load --h1,
# CONNS connections) and records, per request, what NAME's processes
# spent and did: CPU time (ms per 1000), context switches and, with perf,
# futex, nanosleep (the Go runtime's monitor naps with it), epoll_wait and
# all system calls.
h1_counts() {
	local before after cs0 cs1 out done_ prof=
	if [ -n "$perf_ok" ]; then
		perf stat -x, -o "$work/counts.perf" -p "$(proc_pids "$1")" -e context-switches,raw_syscalls:sys_enter \
			-e syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait 2>/dev/null & prof=$!
		sleep 0.2
	fi
	before=$(cpu_ticks "$1"); cs0=$(switches "$1")
	out=$(h2load --h1 -c"$CONNS" -n"${H1N:-40000}" "$2")
	after=$(cpu_ticks "$1"); cs1=$(switches "$1")
	done_=$(echo "$out" | awk '/^requests:/ {print $8}')
	local futex=- nap=- epoll=- calls=-
	if [ -n "$prof" ]; then
		kill -INT "$prof"; wait "$prof" 2>/dev/null || true
		read -r futex nap epoll calls < <(awk -F, -v n="$done_" '
			/sys_enter_futex/ {f = $1} /sys_enter_nanosleep/ {s = $1} /sys_enter_epoll_(p)?wait/ {e += $1} /raw_syscalls/ {c = $1}
			END {printf "%.3f %.3f %.3f %.2f\n", f / n, s / n, e / n, c / n}' "$work/counts.perf")
	fi
	echo "$1 $(( (after - before) * 1000 * 1000 / hz / done_ )) $(awk -v c=$((cs1 - cs0)) -v n="$done_" 'BEGIN {printf "%.3f", c / n}') $futex $nap $epoll $calls" |
		tee -a "$work/counts" >&2
}
perf_ok=
if [ -n "${COUNTS:-}" ] && perf stat -e syscalls:sys_enter_futex true >/dev/null 2>&1; then
	perf_ok=1
fi
# h2_saturate PHASE NAME URL loads URL at saturation with h2load (CONNS
# streams in flight as CONNS/STREAMS connections) and records NAME's
# requests per second and mean latency.
h2_saturate() {
	local out r p
	out=$(h2load -c"$((CONNS / STREAMS))" -m"$STREAMS" -D"${DURATION%s}" "$3")
	if ! echo "$out" | grep -q " 0 failed, 0 errored"; then
		echo "$out" | grep -E "requests:|status codes:" >&2
	fi
	r=$(echo "$out" | awk '/^finished in/ {print $4}')
	p=$(echo "$out" | awk '$1=="time" && $3=="request:" {print $6}')
	echo "$1 $2 $r $p" | tee -a "$results" >&2
}
# h2_cpu PHASE NAME URL loads URL with H2N HTTP/2 requests and records the
# CPU time NAME's processes spent per 1000 of them (ms).
h2_cpu() {
	local before after out done_
	before=$(cpu_ticks "$2")
	out=$(h2load -c"$((CONNS / STREAMS))" -m"$STREAMS" -n"${H2N:-40000}" "$3")
	after=$(cpu_ticks "$2")
	done_=$(echo "$out" | awk '/^requests:/ {print $8}')
	echo "$1 $2 $(( (after - before) * 1000 * 1000 / hz / done_ )) 0" | tee -a "$results" >&2
}
# h2_profile URL profiles sluice-h2loops under h2load on URL (a run of its
# own, after the rounds): the shares of the kernel and the gateway, its top
# symbols, and the share of its crypto/ symbols.
h2_profile() {
	perf record -q -g -o "$work/perf.data" -p "$h2loops_pid" -- sleep "${DURATION%s}" >/dev/null 2>&1 & local prof=$!
	h2load -c"$((CONNS / STREAMS))" -m"$STREAMS" -D"${DURATION%s}" "$1" >/dev/null
	wait "$prof" || true
	echo "CPU profile of sluice-h2loops under h2load on $1 (perf report, self time):"
	perf report -i "$work/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -5 || true
	perf report -i "$work/perf.data" --no-children --dsos sluice --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -30 || true
	perf report -i "$work/perf.data" --no-children --dsos sluice --sort symbol --stdio 2>/dev/null |
		awk '/^ +[0-9]/ && /crypto/ {s += $1} END {printf "crypto/ symbols (TLS, and any other): %.1f%% of all samples\n", s}' || true
}
# Saturation: wrk sends as fast as each proxy answers.
for round in $(seq "$ROUNDS"); do
	[ -n "$ONLY" ] && break
	for name in $names; do
		out=$(viewing "$name" wrk -t1 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$(port_of "$name")/")
		r=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
		p=$(echo "$out" | awk '$1=="99%" {print $2}')
		echo "saturated $name $r $p" | tee -a "$results" >&2
	done
done
# Latency at a fixed rate every proxy can carry (open loop).
for round in $(seq "$ROUNDS"); do
	[ -n "$ONLY" ] && break
	for name in $names; do
		out=$(viewing "$name" "$work/fixedrate" -url "http://127.0.0.1:$(port_of "$name")/" -rate "$RATE" -duration "$DURATION" -conns "$CONNS")
		r=$(echo "$out" | awk '{print $2}' | tr -d /s)
		p=$(echo "$out" | awk '{for (i = 1; i < NF; i++) if ($i == "p99") print $(i+1)}')
		echo "fixed-rate $name $r $p" | tee -a "$results" >&2
	done
done
# TLS: the same certificate and upstream behind nginx and sluice.
if [ "$TLS" != 0 ] && [ "$ONLY" != h2c ]; then
	tls_port() { case $1 in nginx) echo "$NGXS" ;; sluice) echo "$SLS" ;; sluice-baseline) echo "$SLBS" ;; sluice-h2loops) echo "$SLCS" ;; esac; }
	for port in $NGXS $SLS ${BASELINE:+$SLBS} ${H2TLS:+$SLCS}; do
		for _ in $(seq 50); do curl -fsk -o /dev/null "https://127.0.0.1:$port/" && break; sleep 0.1; done
	done
	for round in $(seq "$ROUNDS"); do
		for name in nginx sluice ${H2TLS:+sluice-h2loops} ${BASELINE:+sluice-baseline}; do
			if [ "$name" != sluice-h2loops ]; then # its HTTP/1.1 is sluice's
				out=$(wrk -t1 -c"$CONNS" -d"$DURATION" --latency "https://127.0.0.1:$(tls_port "$name")/")
				r=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
				p=$(echo "$out" | awk '$1=="99%" {print $2}')
				echo "https $name $r $p" | tee -a "$results" >&2
			fi
			if [ -n "${COUNTS:-}" ] && [ "$name" != sluice-h2loops ]; then
				h1_counts "$name" "https://127.0.0.1:$(tls_port "$name")/"
			fi
			[ "$H2" = 0 ] && continue
			h2_saturate h2 "$name" "https://127.0.0.1:$(tls_port "$name")/"
			if [ -n "${H2TLS:-}" ] && [ "$name" != sluice-baseline ]; then
				h2_cpu h2-cpu "$name" "https://127.0.0.1:$(tls_port "$name")/"
			fi
		done
	done
	if [ -n "${PERF:-}" ] && [ -n "${H2TLS:-}" ] && [ "$H2" != 0 ]; then
		h2_profile "https://127.0.0.1:$SLCS/"
	fi
fi

# HTTP/2 ceilings (H2CEILING=1): net/http's HTTP/2 server over TLS, which
# serves sluice's HTTP/2, answering by itself (h2hello) and with the least
# proxying to the same upstream (h2proxy, bench/cmd/h2ceiling), measured in
# rounds of their own, interleaved with nginx and sluice over HTTP/2.
if [ -n "${H2CEILING:-}" ] && [ "$TLS" != 0 ]; then
	H2H=$(free_port); H2P=$(free_port)
	(cd bench && go build -o "$work/h2ceiling" ./cmd/h2ceiling)
	"$work/h2ceiling" "127.0.0.1:$H2H" "$work/cert.pem" "$work/key.pem" 2>"$work/h2hello.log" & pids+=($!)
	"$work/h2ceiling" "127.0.0.1:$H2P" "$work/cert.pem" "$work/key.pem" "127.0.0.1:$UP" 2>"$work/h2proxy.log" & pids+=($!)
	ceiling_port() { case $1 in nginx) echo "$NGXS" ;; sluice) echo "$SLS" ;; h2hello) echo "$H2H" ;; h2proxy) echo "$H2P" ;; esac; }
	for port in $H2H $H2P; do
		for _ in $(seq 50); do curl -fsk -o /dev/null "https://127.0.0.1:$port/" && break; sleep 0.1; done
	done
	for round in $(seq "$ROUNDS"); do
		for name in nginx sluice h2hello h2proxy; do
			out=$(h2load -c"$((CONNS / STREAMS))" -m"$STREAMS" -D"${DURATION%s}" "https://127.0.0.1:$(ceiling_port "$name")/")
			r=$(echo "$out" | awk '/^finished in/ {print $4}')
			p=$(echo "$out" | awk '$1=="time" && $3=="request:" {print $6}')
			echo "h2ceiling $name $r $p" | tee -a "$results" >&2
		done
	done
fi

# h2c (H2C=1): HTTP/2 without TLS, prior knowledge.
if [ -n "${H2C:-}" ]; then
	h2c_port() { case $1 in nginx) echo "$NGXC" ;; sluice) echo "$SL" ;; sluice-h2loops) echo "$SLC" ;; esac; }
	for port in $SLC; do
		for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
	done
	for round in $(seq "$ROUNDS"); do
		for name in nginx sluice sluice-h2loops; do
			h2_saturate h2c "$name" "http://127.0.0.1:$(h2c_port "$name")/"
			h2_cpu h2c-cpu "$name" "http://127.0.0.1:$(h2c_port "$name")/"
		done
	done
	if [ -n "${PERF:-}" ]; then
		h2_profile "http://127.0.0.1:$SLC/"
	fi
fi

if [ -s "$work/counts" ]; then
	echo
	echo "HTTPS HTTP/1.1, per request over h2load --h1 -n${H1N:-40000} -c$CONNS (medians of the rounds; - without perf):"
	python3 - "$work/counts" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, *vals = line.split()
    rows[name].append(vals)
print(f"{'proxy':16} {'CPU ms/1000':>11} {'switches':>9} {'futex':>7} {'nanosleep':>9} {'epoll_wait':>10} {'syscalls':>9}")
for name, vals in rows.items():
    cols = []
    for col in zip(*vals):
        xs = [float(x) for x in col if x != "-"]
        cols.append(f"{statistics.median(xs):.3g}" if xs else "-")
    print(f"{name:16} {cols[0]:>11} {cols[1]:>9} {cols[2]:>7} {cols[3]:>9} {cols[4]:>10} {cols[5]:>9}")
PY
fi
python3 - "$results" "$RATE" <<'PY'
import collections, statistics, sys
def ms(v):
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[:-len(unit)]) * f
    return float(v)
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    phase, name, rps, p99 = line.split()
    runs[phase, name].append((float(rps), ms(p99)))
label = {"nginx": "nginx", "sluice": "sluice", "sluice-dashboard": "sluice, dashboard open",
         "sluice-trace-0.01": "sluice, tracing 0.01", "sluice-trace-1": "sluice, tracing 1.0", "sluice-baseline": "sluice at BASELINE", "sluice-goroutine": "sluice, goroutine engine", "fasthttp": "bare fasthttp proxy",
         "gnet": "bare gnet event loop", "reverseproxy": "httputil.ReverseProxy"}
label.update({"h2hello": "net/http HTTP/2, no proxy", "h2proxy": "net/http HTTP/2, least proxy",
              "sluice-h2loops": "sluice, HTTP/2 on the loops"})
def ratio(xs, base):
    # The median over rounds of each round's ratio to nginx's in the same
    # round, and their range: a round's proxies run one after the other,
    # so the pairing cancels much of the machine's drift between rounds.
    rs = sorted(x / b for x, b in zip(xs, base))
    if not rs:
        return "-"
    return f"{statistics.median(rs):.2f} ({rs[0]:.2f}-{rs[-1]:.2f})"
for phase, proto in (("h2c", "h2c"), ("h2", "HTTP/2 over TLS")):
    cpu = {name: [r for r, _ in runs.get((phase + "-cpu", name), [])] for name in ("nginx", "sluice", "sluice-h2loops")}
    if any(cpu.values()):
        print(f"\n{proto} CPU time per 1000 requests (ms, user and system, the proxy's processes): median (range) of the rounds; ratio to nginx by round")
        for name, xs in cpu.items():
            if xs:
                print(f"{label[name]:26} {statistics.median(xs):8.0f} ({min(xs):.0f}-{max(xs):.0f}) {ratio(xs, cpu['nginx']):>20}")
        if cpu["sluice"] and cpu["sluice-h2loops"]:
            print(f"{proto} on the loops vs net/http's, same build, CPU per request: {ratio(cpu['sluice-h2loops'], cpu['sluice'])}")
    sat = {name: [r for r, _ in runs.get((phase, name), [])] for name in ("sluice", "sluice-h2loops")}
    if sat["sluice"] and sat["sluice-h2loops"]:
        print(f"\n{proto} on the loops vs net/http's, same build, req/s: {ratio(sat['sluice-h2loops'], sat['sluice'])}")
for phase, title in (("saturated", "saturation (wrk)"), ("fixed-rate", f"fixed rate of {sys.argv[2]} req/s (open loop)"),
                     ("https", "HTTPS, HTTP/1.1 keep-alive, saturation (wrk)"), ("h2", "HTTP/2 over TLS, saturation (h2load; latency: mean)"),
                     ("h2ceiling", "HTTP/2 over TLS beside net/http's ceilings (h2load; latency: mean)"),
                     ("h2c", "h2c, prior knowledge, saturation (h2load; latency: mean)")):
    if not any(p == phase for p, _ in runs):
        continue
    print(f"\n{title}: medians; ratios to nginx: median (range) of the rounds' ratios")
    print(f"{'proxy':26} {'req/s':>10} {'p99 ms':>8} {'req/s vs nginx':>20} {'p99 vs nginx':>20}")
    base = runs[phase, "nginx"]
    for name, text in label.items():
        rs = runs[phase, name]
        if not rs:
            continue
        rps, p99 = statistics.median(r for r, _ in rs), statistics.median(p for _, p in rs)
        print(f"{text:26} {rps:10.0f} {p99:8.2f} {ratio([r for r, _ in rs], [r for r, _ in base]):>20} "
              f"{ratio([p for _, p in rs], [p for _, p in base]):>20}")
    open_, closed = runs[phase, "sluice-dashboard"], runs[phase, "sluice"]
    if open_ and closed:
        print(f"dashboard open vs closed, same gateway: req/s {ratio([r for r, _ in open_], [r for r, _ in closed])}, "
              f"p99 {ratio([p for _, p in open_], [p for _, p in closed])}")
    for name in ("sluice-trace-0.01", "sluice-trace-1"):
        rs = runs[phase, name]
        if rs and closed:
            print(f"{label[name]} vs tracing off, same build: req/s {ratio([r for r, _ in rs], [r for r, _ in closed])}, "
                  f"p99 {ratio([p for _, p in rs], [p for _, p in closed])}")
PY
