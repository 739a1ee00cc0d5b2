#!/usr/bin/env bash
# Differential test against nginx: sends the same hostile requests through
# nginx and `sluice serve` on each engine (loop, goroutine) and through
# both proxies' TLS listeners, each in front of a recording upstream of its
# own, then reads the raw bytes each upstream got with net/http's strict
# parser, fasthttp's and a lenient one, and reports where the proxies or
# the parsers disagree (bench/cmd/differential documents the report).
# HTTP/2 cases (raw frames) go to both proxies' TLS listeners, to one more
# sluice TLS listener and, by prior knowledge (h2c), to two more sluice:
# of each pair net/http's HTTP/2 server serves one (server.http2.loops
# false), the event loops the other (true; HTTP/2 over TLS once the loops
# serve it), so that the report compares the engines' HTTP/2.
# nginx proxies as commonly configured: HTTP/1.1 and keep-alive to the
# upstream, Host, X-Real-IP, X-Forwarded-For and -Proto set.
#
#   scripts/differential.sh              # the built-in corpus and the gateway's fuzz seeds
#   scripts/differential.sh -run 'chunk' # only the cases whose name matches
#   scripts/differential.sh -v           # every case's upstream bytes, not only divergent ones
#
# Arguments go to bench/cmd/differential. Loopback only; takes a minute or
# two. Not run in CI: triaged findings are tests in gateway/ and lines in
# docs/hostile-input.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nginx >/dev/null || ! command -v openssl >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx openssl >/dev/null
fi
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
NGX=$(free_port); NGXS=$(free_port); SLL=$(free_port); SLG=$(free_port); SLT=$(free_port); SLTP=$(free_port); SLH=$(free_port); SLHL=$(free_port)
SLTL=$(free_port); SLTLP=$(free_port)
R_NGX=$(free_port); R_NGXS=$(free_port); R_SLL=$(free_port); R_SLG=$(free_port); R_SLT=$(free_port)
R_SLH=$(free_port); R_SLHL=$(free_port); R_SLTL=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

proxy_conf='proxy_http_version 1.1; proxy_set_header Connection "";
    proxy_set_header Host $host; proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; proxy_set_header X-Forwarded-Proto $scheme;'
cat >"$work/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  upstream rec { server 127.0.0.1:$R_NGX; keepalive 16; }
  upstream recs { server 127.0.0.1:$R_NGXS; keepalive 16; }
  server { listen 127.0.0.1:$NGX; location / { proxy_pass http://rec; $proxy_conf } }
  server {
    listen 127.0.0.1:$NGXS ssl http2;
    ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;
    location / { proxy_pass http://recs; $proxy_conf }
  }
}
NGINX
nginx -c "$work/nginx.conf"

# sluice_conf NAME SERVER LISTEN RECORDER [TLS-LISTEN]
sluice_conf() {
	{
		echo "listen: 127.0.0.1:$3"
		echo "admin: {listen: 127.0.0.1:$(free_port)}"
		echo "log: {level: error}"
		echo "server: {$2}"
		[ -n "${5:-}" ] && echo "tls: {listen: 127.0.0.1:$5, certificates: [{cert_file: $work/cert.pem, key_file: $work/key.pem}]}"
		echo "upstreams:"
		echo "  rec: {targets: [\"http://127.0.0.1:$4\"]}"
		echo "routes:"
		echo "  - {name: all, upstream: rec}"
	} >"$work/$1.yaml"
}
sluice_conf loop "engine: loop" "$SLL" "$R_SLL"
sluice_conf goroutine "engine: goroutine" "$SLG" "$R_SLG"
sluice_conf tls "engine: loop, http2: {loops: false}" "$SLTP" "$R_SLT" "$SLT"
sluice_conf tlsloop "engine: loop, http2: {loops: true}" "$SLTLP" "$R_SLTL" "$SLTL"
sluice_conf h2c "engine: loop, http2: {loops: false}" "$SLH" "$R_SLH"
sluice_conf h2loop "engine: loop, http2: {loops: true}" "$SLHL" "$R_SLHL"
go build -o "$work/sluice" ./cmd/sluice
(cd bench && go build -o "$work/differential" ./cmd/differential)
for c in loop goroutine tls tlsloop h2c h2loop; do
	"$work/sluice" serve --config "$work/$c.yaml" --watch=false 2>"$work/sluice-$c.log" & pids+=($!)
done

seeds=gateway/testdata/fuzz/FuzzForward,internal/http1/testdata/fuzz/FuzzParseRequest
"$work/differential" -seeds "$seeds" \
	-proxy "nginx=127.0.0.1:$NGX@127.0.0.1:$R_NGX" \
	-proxy "sluice-loop=127.0.0.1:$SLL@127.0.0.1:$R_SLL" \
	-proxy "sluice-goroutine=127.0.0.1:$SLG@127.0.0.1:$R_SLG" \
	-proxy "nginx-tls=tls://127.0.0.1:$NGXS@127.0.0.1:$R_NGXS" \
	-proxy "sluice-h2c=h2c://127.0.0.1:$SLH@127.0.0.1:$R_SLH" \
	-proxy "sluice-h2loop=h2c://127.0.0.1:$SLHL@127.0.0.1:$R_SLHL" \
	-proxy "sluice-tls=tls://127.0.0.1:$SLT@127.0.0.1:$R_SLT" \
	-proxy "sluice-tlsloop=tls://127.0.0.1:$SLTL@127.0.0.1:$R_SLTL" \
	"$@"
