// Package config is the schema of the gateway's YAML configuration: decoding
// (strict: unknown fields and wrong types are errors), defaults, and
// validation that reports every problem at once with file:line:col and the
// field.
//
// Every field has a default, documented on the field; Load applies it when
// the field is absent from the file or null. A value the file gives, zero
// included, is never replaced: it is validated like any other, so
// "period: 0s" is an error rather than the default 1s. Durations lie
// between MinDuration and MaxDuration unless their field says otherwise;
// header names are RFC 9110 tokens. The file examples/sluice.yaml is a
// commented example that validates.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"go.yaml.in/yaml/v4"
)

// Config is a whole gateway configuration.
type Config struct {
	// Listen is the address the gateway serves plaintext on: HTTP/1.1,
	// and HTTP/2 without TLS (h2c: prior knowledge, or Upgrade: h2c on a
	// connection's first request). Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// TLS, when set, is a second listener that terminates TLS. Default:
	// none.
	TLS *TLS `yaml:"tls"`
	// Admin is the admin API's listener.
	Admin Admin `yaml:"admin"`
	// Store is where shared rate-limit state lives.
	Store Store `yaml:"store"`
	// TrustedProxies lists the CIDRs (or single IPs) whose X-Forwarded-For
	// header is believed when taking a client's address (and extended on
	// the way upstream), and whose X-Forwarded-Host and X-Forwarded-Proto
	// go upstream as they came (a proxy in front that terminated TLS says
	// https). The client is the right-most X-Forwarded-For entry that is
	// not a trusted proxy; an entry with a port ("192.0.2.1:4711",
	// "[2001:db8::1]:4711") is read without it, and one that is no
	// address ("unknown") makes the trusted proxy that added it the
	// client. Default: none, so the peer address is always used, and the
	// gateway sets X-Forwarded-Host to the client's Host and
	// X-Forwarded-Proto to http.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Server holds the listener's limits and timeouts.
	Server Server `yaml:"server"`
	// Log configures the request log.
	Log Log `yaml:"log"`
	// Tracing exports OpenTelemetry traces. Default: off (nil).
	Tracing *Tracing `yaml:"tracing"`
	// Upstreams are the pools of targets routes send to, by name. Only these
	// targets are ever reachable through the gateway.
	Upstreams map[string]*Upstream `yaml:"upstreams"`
	// Routes are tried in order; the first that matches a request serves it.
	// A request that matches none gets 404.
	Routes []*Route `yaml:"routes"`
}

// TLS is the HTTPS listener: HTTP/2 and HTTP/1.1, chosen by ALPN.
// Certificate files are read when the configuration is applied, at start
// and on every reload: a file that cannot be read or parsed refuses the
// configuration, and the certificates in use keep serving. A change of
// Listen takes effect at the next start, not on reload.
type TLS struct {
	// Listen is the address (host:port). Required.
	Listen string `yaml:"listen"`
	// Certificates are the server's certificates, at least one. A client's
	// SNI name picks the certificate whose leaf names it (exactly, or by a
	// wildcard such as *.example.com); a client that sends no name, or a
	// name no certificate has, gets the first.
	Certificates []Certificate `yaml:"certificates"`
	// MinVersion is the lowest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
}

// Certificate is a certificate chain and its private key, PEM files. A
// relative path is relative to the configuration file's directory.
type Certificate struct {
	// CertFile holds the certificate, then its intermediates. Required.
	CertFile string `yaml:"cert_file"`
	// KeyFile holds the private key. Required.
	KeyFile string `yaml:"key_file"`
}

// Admin configures the admin API (/metrics, /status, /healthz, /readyz,
// POST /reload).
type Admin struct {
	// Listen is the admin address. Default 127.0.0.1:9901. "off" disables
	// the admin API. Its listener takes the limits of Server
	// (read_header_timeout, idle_timeout, max_header_bytes) and holds at
	// most 64 connections at once.
	Listen string `yaml:"listen"`
	// Token, when set, is the bearer token that mutating endpoints
	// (POST /reload) require. Default: none. Required when Listen is not
	// on loopback (an IP other than 127.0.0.0/8 or ::1, an empty host, or a
	// name other than localhost). Letters, digits and -._~+/, then optional
	// '=' (RFC 6750 token syntax).
	Token string `yaml:"token"`
}

// Store says where rate-limit state lives.
type Store struct {
	// Kind is "memory" (default: each replica limits on its own) or "redis"
	// (replicas share exact limits).
	Kind string `yaml:"kind"`
	// MaxKeys caps how many keys the in-memory store holds (the memory
	// store, and the local fallback of a Redis store): when full it evicts
	// idle keys first, then the least recently used, and never refuses a
	// new client. Default 1048576.
	MaxKeys int `yaml:"max_keys"`
	// Redis is used when Kind is "redis".
	Redis Redis `yaml:"redis"`
}

// Redis is a connection to Redis for shared rate limits.
type Redis struct {
	// Addrs are host:port addresses. One address is a standalone server;
	// several are the seeds of a Redis Cluster; with Sentinel, they are the
	// Sentinels. Default 127.0.0.1:6379, or 127.0.0.1:26379 with Sentinel.
	Addrs []string `yaml:"addrs"`
	// Sentinel names the master set; when set, addrs are the Sentinels'
	// addresses (Redis Sentinel) instead of a server or a Cluster's nodes.
	// Default: none.
	Sentinel string `yaml:"sentinel"`
	// OnError is what a decision does while Redis is unreachable: "open"
	// (allow), "closed" (reject) or "local" (default: apply the same limit
	// per replica, in memory).
	OnError ratelimit.ErrorPolicy `yaml:"on_error"`
	// Timeout bounds one decision's round trip. Default 50ms, at most 1m.
	Timeout Duration `yaml:"timeout"`
	// Prefix starts every key, as {prefix:key}. It has no ':', '{' or '}',
	// so that gateways of different prefixes never share a key. Default
	// "sluice".
	Prefix string `yaml:"prefix"`
	// Password authenticates to Redis. Default: none.
	Password string `yaml:"password"`
}

// Server holds the gateway listener's limits, which defeat slow-header and
// slow-body clients.
type Server struct {
	// ReadHeaderTimeout bounds reading a request's headers, and a TLS
	// handshake on the tls listener: a connection whose head has not come
	// whole by then is closed without an answer. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included, but for
	// a gRPC call's, which its own deadline bounds (a stream may last).
	// Default 60s.
	ReadTimeout Duration `yaml:"read_timeout"`
	// IdleTimeout closes keep-alive connections idle this long. Default 120s.
	// A connection whose responses wait for the client to read them is not
	// idle: WriteTimeout bounds it. An HTTP/2 connection is idle while no
	// stream is open, whatever other frames come.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// WriteTimeout bounds each wait to send a response to a client: a
	// client that reads nothing of it for this long (as one that stopped
	// reading a long response) loses its connection, and the upstream
	// connection the response came from is closed. It bounds the time
	// between two writes that make progress, not the whole response, so
	// that long streams (SSE, downloads) to a reading client are not cut.
	// Default 60s.
	WriteTimeout Duration `yaml:"write_timeout"`
	// MaxHeaderBytes limits the size of a request's headers (request line
	// included); a request with more gets 431. Each connection holds a read
	// buffer of this size. Default 32 KiB, at most 1 MiB.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxBodyBytes limits the size of a request body, a gRPC call's
	// request included (RESOURCE_EXHAUSTED past it); 0 means no limit.
	// A longer body is answered 413, at the request's head when its
	// Content-Length declares it (an Expect: 100-continue then gets the
	// 413, not 100), and an HTTP/1.x connection closes after the answer
	// (see README, "A refused body closes"). Default 0.
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// MaxHeldBodyBytes bounds, across the whole gateway, the request
	// bodies held in memory so that a retry may send them again (those of
	// a Content-Length up to 1 MiB, served on goroutines: HTTP/2 streams,
	// the goroutine engine, what the loops hand over; a gRPC call's
	// request on a route that retries), counted as their buffers grow
	// while their bytes arrive, not at their announced length; and the
	// bodies of up to 64 KiB the event loops serve themselves (HTTP/1.1
	// and HTTP/2), counted whole once arrived, until their request ends.
	// A body whose buffer would pass it streams once instead (the bytes
	// read first, still counted until they are sent, then the rest; on
	// the loops it is sent once) and its request is not retried, as
	// Envoy's retry buffer limit does; the request is still served. 0
	// holds none.
	// Default 64 MiB.
	MaxHeldBodyBytes int `yaml:"max_held_body_bytes"`
	// MaxConnections bounds the client connections open at once on all
	// listeners together (plaintext and tls, whichever engine serves
	// them: event loops, goroutines, HTTP/2, WebSocket tunnels,
	// connections closing after their last answer), from their accept
	// until their socket is closed. Past it the gateway accepts nothing
	// more until one closes: new connections wait in the kernel's listen
	// queue, as with nginx's worker_connections or HAProxy's maxconn, and
	// a warning is logged (at most once a minute) and counted
	// (sluice_connection_waits_total). While it is reached, the
	// connections idle between HTTP/1.1 requests (keep-alive) are
	// closed, the oldest first and at most 32 at a time, to make room,
	// as nginx does (sluice_connections_reclaimed_total). A reload
	// changes it for the connections accepted after; none is closed by a
	// lower bound but idle ones that make room. 0
	// means no bound. Default 10000: each connection holds a file
	// descriptor (two while it is handed between engines) and buffers
	// (a read buffer of max_header_bytes, more for TLS and HTTP/2), so
	// that 10000 stay well under the file descriptor limit Go raises to
	// the system's hard limit and within the memory of a small machine,
	// while leaving room for the upstream connections; raise it with the
	// limit and the memory.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerClient bounds the connections one client holds
	// open at once, counted as MaxConnections counts them: a connection
	// accepted past it is closed at once, unanswered, and counted
	// (sluice_connections_refused_total). A client is the TCP peer's
	// address, never a header, an IPv6 one by its /64: every client
	// behind one NAT, and every client of a proxy or load balancer in
	// front of the gateway, is one client here, so set it above what
	// such a front holds open. A reload changes it for the connections
	// accepted after. 0 (the default) means no bound.
	MaxConnectionsPerClient int `yaml:"max_connections_per_client"`
	// ShutdownTimeout is how long graceful shutdown waits for requests in
	// flight before closing them. Default 30s. WebSocket connections still
	// open at its end get a close frame 1001 (going away) and are closed.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// WebSocketIdleTimeout closes a WebSocket connection through which no
	// byte passed either way for this long, with a close frame 1001 to
	// both ends. Default 5m.
	WebSocketIdleTimeout Duration `yaml:"websocket_idle_timeout"`
	// GRPCIdleTimeout ends a gRPC call through which no byte passed either
	// way (no message from the client, none from the upstream) for this
	// long: the client gets DEADLINE_EXCEEDED (grpc-message idle_timeout),
	// the upstream's stream is reset, and the route's concurrency slot is
	// released; the route's policies learn nothing of the upstream from
	// it, since either side may be the silent one. It bounds every call,
	// with or without a grpc-timeout. Default 5m.
	GRPCIdleTimeout Duration `yaml:"grpc_idle_timeout"`
	// HTTP2 holds the limits of HTTP/2 connections (TLS and h2c).
	// MaxHeaderBytes bounds an HTTP/2 request's header list too.
	HTTP2 HTTP2 `yaml:"http2"`
	// Engine is "loop" (default): event loops, one per core, serve the
	// requests of routes whose policies decide at once or wait on a timer
	// (retries), and hand everything else (coalescing, queues, a Redis
	// store, streamed bodies, ...) to goroutines; or "goroutine": a
	// goroutine per connection serves everything. "loop" needs Linux;
	// elsewhere it means "goroutine". The engine serves the tls listener's
	// HTTP/1.1 too, after the handshake. A change takes effect at the next
	// start, not on reload.
	Engine string `yaml:"engine"`
}

// HTTP2 bounds what one HTTP/2 client connection may hold. Flow control
// gives a request body the backpressure HTTP/1.1 streaming has: a client
// sends no more than the window until the upstream has taken what came
// before.
type HTTP2 struct {
	// MaxConcurrentStreams is how many requests a connection may have in
	// flight at once. Default 250, at most 10000.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// MaxStreamBufferBytes is the flow-control window of one request body:
	// how much of it the gateway buffers before the client must wait.
	// Default 1 MiB, between 64 KiB and 4 MiB.
	MaxStreamBufferBytes int `yaml:"max_stream_buffer_bytes"`
	// MaxWebSocketsPerConnection is how many WebSockets (RFC 8441, each on
	// a stream) one connection may carry at once; a handshake past it is
	// refused with 429 (reason websocket_limit), as a browser opens a
	// handful per page. Default 100, at most 10000.
	MaxWebSocketsPerConnection int `yaml:"max_websockets_per_connection"`
	// Loops serves h2c (prior knowledge) and HTTP/2 over TLS (ALPN h2) on
	// the event loops rather than on net/http's HTTP/2 server. Default true
	// with server.engine loop, false with goroutine; it has effect only
	// with server.engine loop on Linux (elsewhere net/http's HTTP/2 server
	// serves HTTP/2), and false there brings net/http's HTTP/2 server back.
	// The loops serve the requests they serve as HTTP/1.1 (a body of known
	// length up to 64 KiB, a route that decides at once) themselves, and
	// every other stream (gRPC, WebSocket over HTTP/2, larger or streamed
	// bodies, request trailers, streamed answers) through a goroutine
	// bridged to the loop. The plaintext listener's Upgrade to h2c stays
	// on net/http's.
	Loops bool `yaml:"loops"`
}

// Log configures the one log line per request.
type Log struct {
	// Format is "json" (default) or "text".
	Format string `yaml:"format"`
	// Level is "debug", "info" (default), "warn" or "error". Request lines
	// are at info.
	Level string `yaml:"level"`
	// Sample is the fraction of successful requests logged, in (0, 1].
	// Failed and rejected requests are always logged. Default 1.
	Sample float64 `yaml:"sample"`
}

// Upstream is a pool of targets.
type Upstream struct {
	// Targets are base URLs (http://host:port or https://host:port). At
	// least one.
	Targets []string `yaml:"targets"`
	// Protocol is how the gateway talks to the targets: "http1" (default:
	// HTTP/1.1, over TLS for https targets), "h2c" (HTTP/2 without TLS,
	// by prior knowledge; http targets) or "h2" (HTTP/2 over TLS; https
	// targets). HTTP/2 connections are reused by concurrent requests.
	Protocol string `yaml:"protocol"`
	// TLS configures the connections to https targets. Default: the
	// system's roots, the target's host as the server name, no client
	// certificate.
	TLS *UpstreamTLS `yaml:"tls"`
	// Balance picks a target: "round_robin" (default), "least_inflight" or
	// "p2c" (power of two random choices by in-flight count).
	Balance string `yaml:"balance"`
	// Health enables active health checks; passive health (a breaker per
	// target) is always on.
	Health *Health `yaml:"health"`
	// IdleTimeout is how long a keep-alive connection to a target may sit
	// unused before sluice closes it. Default 4s: below the keep-alive
	// timeouts of common servers (Node.js 5s, nginx 75s), so that sluice
	// closes an idle connection before the target does. Keep it below the
	// target's own.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// ConnectTimeout bounds connecting to a target; a route's timeout,
	// when shorter, ends it sooner. An attempt that cannot connect in time
	// ends as a timeout (504, as nginx's proxy_connect_timeout) that
	// retries treat as a connection error (retry.on's connect_error: the
	// target never saw the request). Default 5s.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// ResponseHeaderTimeout bounds an attempt's wait for its response's
	// head, counted from the attempt's start (connecting and sending the
	// request included; a body of at most 64 KiB, which the gateway reads
	// whole, too), then each wait between two reads of a streamed body, as
	// nginx's proxy_read_timeout. A route's timeout, when shorter, bounds
	// the head instead. An attempt that waits longer for its head ends as a
	// timeout (504, and retried on timeout) on every route and engine, with
	// or without a timeout policy; a streamed body that stalls longer is
	// cut, and the client's connection closed. It does not bound a gRPC
	// call, whose answer may come only at its end: its deadline
	// (grpc-timeout), server.grpc_idle_timeout and the route's timeout do.
	// Default 60s.
	ResponseHeaderTimeout Duration `yaml:"response_header_timeout"`
}

// UpstreamTLS is how the gateway connects to https targets. Files are PEM,
// read when the configuration is applied (start and reload; a file that
// cannot be read refuses the configuration); a relative path is relative to
// the configuration file's directory. TLS 1.2 is the lowest version used.
type UpstreamTLS struct {
	// CAFile holds the certificates that sign the targets' certificates.
	// Default: the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the gateway's client certificate, for
	// targets that require one (mTLS). Default: none. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name sent by SNI and checked against the target's
	// certificate. Default: the target's host.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate from the targets: for
	// tests only, it lets anyone on the path read and change the traffic.
	// Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Health configures active health checks of an upstream's targets.
type Health struct {
	// Path is requested with GET; a 2xx or 3xx answer is healthy. Required.
	Path string `yaml:"path"`
	// Interval between checks. Default 5s, at least 100ms.
	Interval Duration `yaml:"interval"`
	// Timeout of one check. Default 1s.
	Timeout Duration `yaml:"timeout"`
}

// Route sends matching requests to an upstream through policies.
type Route struct {
	// Name identifies the route in metrics, logs and /status, and starts
	// its rate-limit keys. Required, unique, without '|' (which separates
	// a key's parts).
	Name string `yaml:"name"`
	// Match says which requests the route serves.
	Match Match `yaml:"match"`
	// Upstream names the pool the route sends to. Required.
	Upstream string `yaml:"upstream"`
	// Policies are applied in sluice's default order: rate limit, coalesce,
	// fallback, retry, circuit breaker, concurrency, timeout.
	Policies Policies `yaml:"policies"`
	// GRPC says how the route serves gRPC calls. Default: no call is
	// retried.
	GRPC *GRPC `yaml:"grpc"`
	// Rewrite changes the request's path on its way upstream, after
	// routing (Match sees the client's path). Default: none.
	Rewrite *Rewrite `yaml:"rewrite"`
	// Headers changes the request's headers on their way upstream and the
	// upstream response's on their way to the client, after routing and
	// after the hop-by-hop headers are dropped. Default: none.
	Headers *HeaderRules `yaml:"headers"`
	// PreserveHost sends the client's Host header upstream; by default
	// (false) the upstream sees its target's host:port. X-Forwarded-Host
	// carries the client's Host either way.
	PreserveHost bool `yaml:"preserve_host"`
}

// GRPC configures a route's gRPC calls: requests over HTTP/2 whose
// Content-Type is application/grpc or application/grpc+FORMAT. Their
// rejections are gRPC answers (HTTP 200 with grpc-status), their outcome
// is read from the upstream's grpc-status, and a grpc-timeout shortens
// each attempt's deadline.
type GRPC struct {
	// Idempotent lists the calls the route's retry policy may send again:
	// full method names ("/pkg.Service/Method") or whole services
	// ("/pkg.Service/*"), retried when the route has a retry policy (on
	// UNAVAILABLE, and on what retry.on names of connect_error and
	// timeout), and hedged when it hedges and the call's request is one
	// message (a unary or server-streaming call; never a client or
	// bidirectional stream of several). A call of any other method is
	// sent once. On a route that retries, the gateway reads such a call's
	// request whole (up to 1 MiB; a longer one is sent once) before it
	// sends it, and, unless the call is hedged, its answer too, so that a
	// retry can replace it: name only unary and client-streaming methods
	// there. A hedged call's race ends with an answer's first message,
	// and the rest streams as it comes; on a route that only hedges, the
	// request is not held back either (it streams to the first attempt,
	// and a hedge is sent only once it has ended as one message), so any
	// method may be named. Default: none.
	Idempotent []string `yaml:"idempotent"`
}

// Rewrite changes a request's path: StripPrefix comes off, then AddPrefix
// goes on. The query is kept. The path is the one the route matched,
// percent-decoded, dot segments resolved and slashes merged, which is
// what the upstream gets on every protocol (gRPC calls included).
type Rewrite struct {
	// StripPrefix is removed from the start of the path when the path
	// starts with it at a segment boundary (the path is the prefix, or
	// goes on with "/"); a path that was the prefix alone becomes "/".
	// It starts with "/" and does not end with "/". Default: none.
	StripPrefix string `yaml:"strip_prefix"`
	// AddPrefix is put before the path. It starts with "/" and does not
	// end with "/". Default: none.
	AddPrefix string `yaml:"add_prefix"`
}

// HeaderRules are a route's changes to the headers of its requests and of
// their upstream responses (not of the gateway's own answers: errors,
// rejections, fallbacks).
type HeaderRules struct {
	Request  HeaderEdit `yaml:"request"`
	Response HeaderEdit `yaml:"response"`
}

// HeaderEdit changes a message's headers: Remove drops every field of each
// name, then Set replaces every field of each name with its value, then
// Add adds a field beside those already there. Names are RFC 9110 tokens,
// matched without regard to case, and on a request with '-' and '_' alike
// too (Remove and Set take out a client's X_Secret for X-Secret, which
// servers of CGI's lineage read as one header); values have no control characters but
// tab and no space at either end. The framing and hop-by-hop headers
// (Content-Length, Transfer-Encoding, Host, Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer, Upgrade) are the gateway's to write and
// cannot be named, by a request's rules with '_' for '-' neither
// (Content_Length; preserve_host chooses the Host), nor can a response's
// Date; on a route with a rate limit, the RateLimit and RateLimit-Policy
// headers of every answer are the limit's, whatever the rules say.
type HeaderEdit struct {
	Set    map[string]string `yaml:"set"`
	Add    map[string]string `yaml:"add"`
	Remove []string          `yaml:"remove"`
}

// Match selects requests. Every given condition must hold; an empty Match
// matches everything.
type Match struct {
	// Host matches the request's host (without port), exactly but for
	// case and a trailing dot ("api.example." is "api.example", as to nginx):
	// a DNS name, an IPv4 address or a bracketed IPv6 address, with no
	// port. Default: any.
	Host string `yaml:"host"`
	// PathPrefix matches the start of the path. Default "/".
	PathPrefix string `yaml:"path_prefix"`
	// Methods lists the methods served. Default: all.
	Methods []string `yaml:"methods"`
	// Headers lists headers that must have exactly these values. Names
	// are RFC 9110 tokens with at most MaxKeyHeaderSeparators '-' or '_';
	// values have no control characters but tab and no space at either
	// end. A header is read in any case and with each '-' or '_' either
	// one; a request that sends it on more than one line, or with a comma
	// in its value, is refused (400 ambiguous_header) when a route looks at
	// it, as the comma makes it a list; but for the headers that are no
	// list (Authorization, Proxy-Authorization, Cookie, Date,
	// If-Modified-Since, If-Unmodified-Since, User-Agent, Referer), where a
	// comma is part of the one value. A value with a comma in a header
	// that may be a list is an error.
	Headers map[string]string `yaml:"headers"`
}

// Policies are a route's policies; each is off when absent.
type Policies struct {
	RateLimit      *RateLimit      `yaml:"rate_limit"`
	Concurrency    *Concurrency    `yaml:"concurrency"`
	CircuitBreaker *CircuitBreaker `yaml:"circuit_breaker"`
	Retry          *Retry          `yaml:"retry"`
	// Timeout bounds one attempt upstream from its start: its response's
	// head must come within it (or within the upstream's
	// response_header_timeout when that is shorter), and a streamed body
	// must end within it. An attempt past it ends as a timeout (504, and
	// retried on timeout). Default: none (0s).
	Timeout Duration `yaml:"timeout"`
	// Coalesce makes identical concurrent GET and HEAD requests without a
	// body share one upstream call. Requests are identical when their
	// method, host, path and query, Accept and Accept-Encoding, and
	// everything that says who is asking are: Authorization, Cookie,
	// X-Api-Key, X-Auth-Token, X-Access-Token, the route's rate-limit key
	// (so a route limited per client IP coalesces each client's requests
	// only) and the headers in CoalesceVary. An answer with Set-Cookie,
	// Cache-Control private or no-store, Vary: * or a Vary naming an
	// X-Forwarded-* header (the gateway sets them per client) is never
	// shared, nor one whose Vary names a header that differs: each request
	// that was waiting for it goes upstream itself. Every header is
	// compared under each name a CGI-style server reads as it (any case,
	// '_' for '-': X_Tenant is X-Tenant). Default false.
	Coalesce bool `yaml:"coalesce"`
	// CoalesceVary lists more request headers that must be equal for
	// requests to coalesce, for an upstream that answers by them without
	// saying so in Vary (a tenant header, say). Needs Coalesce. Default
	// none.
	CoalesceVary []string  `yaml:"coalesce_vary"`
	Fallback     *Fallback `yaml:"fallback"`
	Hedge        *Hedge    `yaml:"hedge"`
	Priority     *Priority `yaml:"priority"`
}

// RateLimit limits requests per client key.
type RateLimit struct {
	// Algorithm is one of token_bucket, gcra (default), fixed_window,
	// sliding_log, sliding_window, leaky_bucket.
	Algorithm string `yaml:"algorithm"`
	// Limit is the number of requests allowed per Period. Required, > 0.
	Limit int `yaml:"limit"`
	// Period is the window. Default 1s, at least 1ms; Limit, Period and
	// Burst must keep a key's state within 73 years (Period/Limit × Burst
	// for the bucket algorithms).
	Period Duration `yaml:"period"`
	// Burst is the bucket size for token_bucket, gcra and leaky_bucket.
	// Default: Limit. At least 1.
	Burst int `yaml:"burst"`
	// Key says whose limit a request counts against: "ip" (default: the
	// client address), "header:NAME" (requests without it share one key),
	// or "route" (one limit for the whole route). NAME is an RFC 9110
	// token with at most MaxKeyHeaderSeparators '-' or '_'; the gateway
	// reads the header under NAME in any case and with each '-' or '_'
	// either one, and refuses (400) a request that sends it more than once
	// or with a comma in its value; but a header that is no list
	// (Authorization, Proxy-Authorization, Cookie, the dates, User-Agent,
	// Referer: see Match.Headers) is keyed by its whole value, commas
	// included (Digest credentials).
	Key Source `yaml:"key"`
	// IPv6Prefix is how many leading bits of an IPv6 client's address key
	// it with key: ip. Default 64, the block one site or device is given,
	// so that a client cannot take a fresh limit from each of its
	// addresses; 128 keys each address. From 32 to 128.
	IPv6Prefix int `yaml:"ipv6_prefix"`
}

// MaxKeyHeaderSeparators is how many '-' or '_' the name of a header the
// gateway tells requests apart by (a rate limit's key header, a route's
// match header) may have: it reads the header under every name that
// differs from it only in them.
const MaxKeyHeaderSeparators = 8

// Concurrency limits requests in flight upstream: a static bulkhead (Max) or
// an adaptive limit (Adaptive); not both.
type Concurrency struct {
	// Max is the static limit.
	Max int `yaml:"max"`
	// Queue is how many requests may wait for a slot. Default 0 (reject at
	// once when full).
	Queue int `yaml:"queue"`
	// MaxWait bounds the wait in the queue. Default (and 0s): until the
	// request's own deadline.
	MaxWait  Duration  `yaml:"max_wait"`
	Adaptive *Adaptive `yaml:"adaptive"`
}

// Adaptive is an adaptive concurrency limit.
type Adaptive struct {
	// Algorithm is "default" (sluice's own), "aimd", "vegas", "gradient2"
	// or "latency_gradient". Default "default".
	Algorithm string `yaml:"algorithm"`
	// Min and Max bound the limit. Defaults 1 and 1000.
	Min int `yaml:"min"`
	Max int `yaml:"max"`
	// Initial is the starting limit. Default 20, clamped to [Min, Max].
	Initial int `yaml:"initial"`
}

// CircuitBreaker opens when the upstream fails too much.
type CircuitBreaker struct {
	// FailureRate opens the breaker when at least this fraction of the
	// window's calls failed; 0 turns this condition off. Default 0.5 when
	// no other trip condition is set. A breaker with no trip condition is
	// an error.
	FailureRate float64 `yaml:"failure_rate"`
	// ConsecutiveFailures opens it after this many failures in a row.
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// SlowCall opens it when too many calls are slow.
	SlowCall *SlowCall `yaml:"slow_call"`
	// Window is the sliding window rates are judged over.
	Window Window `yaml:"window"`
	// MinCalls is the number of calls in the window before a rate is
	// judged. Default 20, or a count window's size if that is smaller; at
	// most a count window's size.
	MinCalls int `yaml:"min_calls"`
	// OpenFor is how long the breaker stays open. Default 5s.
	OpenFor Duration `yaml:"open_for"`
	// HalfOpenCalls is the number of probes allowed at once while
	// half-open. Default 3.
	HalfOpenCalls int `yaml:"half_open_calls"`
}

// SlowCall defines slow calls for a breaker.
type SlowCall struct {
	// Threshold: a call that took longer is slow. Required.
	Threshold Duration `yaml:"threshold"`
	// Rate of slow calls that opens the breaker. Default 1.
	Rate float64 `yaml:"rate"`
}

// Window is a breaker's sliding window.
type Window struct {
	// Kind is "count" (default: the last Size calls) or "time" (the calls
	// of the last Size duration).
	Kind string `yaml:"kind"`
	// Size is a number of calls for kind count (default 100, at most
	// MaxCountWindow) or a duration for kind time (default 10s, between
	// MinTimeWindow and MaxDuration).
	Size string `yaml:"size"`
	// Calls (kind count) or Span (kind time) is Size read for its kind,
	// set once by Parse and Load when the configuration is valid; zero
	// until then. Users of a Config read these, never Size.
	Calls int      `yaml:"-"`
	Span  Duration `yaml:"-"`
}

// Retry retries failed attempts upstream.
type Retry struct {
	// Attempts counts the first one. Default 3, at most MaxAttempts.
	Attempts int     `yaml:"attempts"`
	Backoff  Backoff `yaml:"backoff"`
	// On lists what is retried: "connect_error" (the upstream could not be
	// reached), "timeout" (an attempt timed out) and status codes. Default
	// [connect_error, 502, 503, 504]. Only idempotent methods (GET, HEAD,
	// OPTIONS, PUT, DELETE) and requests whose body can be replayed are
	// retried.
	On []RetryOn `yaml:"on"`
	// Budget is the fraction of recent requests that may be retried, so
	// that retries cannot multiply an overload. Default 0.2.
	Budget float64 `yaml:"budget"`
}

// RetryOn is one entry of retry.on, decoded once: RetryConnectError
// ("connect_error"), RetryTimeout ("timeout"), or a status code from 100
// to 599 ("503").
type RetryOn int

// The conditions of retry.on that are not status codes.
const (
	RetryConnectError RetryOn = -1
	RetryTimeout      RetryOn = -2
)

// UnmarshalText decodes connect_error, timeout or a status code.
func (o *RetryOn) UnmarshalText(b []byte) error {
	switch s := string(b); s {
	case "connect_error":
		*o = RetryConnectError
	case "timeout":
		*o = RetryTimeout
	default:
		code, err := strconv.Atoi(s)
		if err != nil || code < 100 || code > 599 {
			return fmt.Errorf("want connect_error, timeout or a status code, got %q", s)
		}
		*o = RetryOn(code)
	}
	return nil
}

// MarshalText is UnmarshalText's inverse.
func (o RetryOn) MarshalText() ([]byte, error) {
	switch o {
	case RetryConnectError:
		return []byte("connect_error"), nil
	case RetryTimeout:
		return []byte("timeout"), nil
	}
	return strconv.AppendInt(nil, int64(o), 10), nil
}

// Status is the status code o names, 0 for connect_error and timeout.
func (o RetryOn) Status() int { return max(int(o), 0) }

// Backoff is the wait between attempts. Its durations are between
// MinBackoff (1ns) and MaxDuration.
type Backoff struct {
	// Initial wait. Default 50ms.
	Initial Duration `yaml:"initial"`
	// Max wait. Default 1s.
	Max Duration `yaml:"max"`
	// Jitter is "full" (default), "equal" or "none".
	Jitter retry.Jitter `yaml:"jitter"`
}

// Fallback degrades a request the route's upstream cannot answer (its
// circuit breaker or concurrency limit refused it, its attempts failed,
// timed out or got a 5xx; a rate limit's 429 is not degraded) through up
// to three levels, tried in this order: another upstream,
// the last good answer to the same request, a static answer. The first
// level that has an answer gives it; when none has, the client gets the
// route's own answer (its error, or the upstream's 5xx).
type Fallback struct {
	// Upstream names another upstream the request is sent to, once, when
	// the route's own cannot answer: its answer is given unless it is a
	// 5xx or the upstream cannot be reached. Only a request that may be
	// sent twice (an idempotent method, a body kept in memory) goes there,
	// and not while its health checks or passive health (five failures in
	// a row) have the chosen target out: the next levels answer at once.
	// It is not the route's upstream, and not with coalesce (nor is
	// LastGood). Default: none.
	Upstream string `yaml:"upstream"`
	// LastGood keeps the last good answer to each GET request and gives
	// it back when a later identical request cannot be answered. Default:
	// off.
	LastGood *LastGood `yaml:"last_good"`
	// Status code of the static answer, 200 to 599. Default 503.
	Status int `yaml:"status"`
	// ContentType of the static answer's body. Default
	// "application/json".
	ContentType string `yaml:"content_type"`
	// Body of the static answer. Default empty.
	Body string `yaml:"body"`
	// GRPCStatus is the grpc-status of the static answer to a gRPC call,
	// which is a gRPC answer (HTTP 200): a code's name as gRPC spells it
	// (UNAVAILABLE, OK, NOT_FOUND, ...) or its number, 0 to 16. Default
	// UNAVAILABLE. With OK, the answer carries one message: Body, the
	// message's protobuf encoding, when ContentType is application/grpc
	// (YAML's "\x0a\x02hi" escapes write any byte), else an empty
	// message (every field its default); then the OK status.
	GRPCStatus string `yaml:"grpc_status"`
	// GRPCMessage is the grpc-message of the static answer to a gRPC
	// call. Default: the failure's reason (circuit_open, timeout, ...), as
	// the gateway's own gRPC answers name it; none with OK.
	GRPCMessage string `yaml:"grpc_message"`
	// GRPCCode is GRPCStatus's number (-1 when it names none). Set by
	// Parse and Load.
	GRPCCode int `yaml:"-"`
	// Static reports whether the static answer is the last level of HTTP
	// requests: when status, content_type or body is given, or when
	// neither upstream nor last_good is (a fallback of the static answer
	// alone). Set by Parse and Load.
	Static bool `yaml:"-"`
	// GRPCStatic reports whether the static answer is the last level of
	// gRPC calls: when Static is, or grpc_status or grpc_message is given.
	// A fallback whose static fields are gRPC's alone answers gRPC calls
	// only: an HTTP request its other levels cannot answer gets the
	// route's own answer. Set by Parse and Load.
	GRPCStatic bool `yaml:"-"`
}

// Load reads, decodes, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes, defaults and validates data; file names it in errors. Every
// problem is reported at once, as Errors; a YAML syntax error is one Error
// with the line and column where the parser stopped.
func Parse(file string, data []byte) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{File: file, Msg: "the file is empty"}}
		}
		return nil, Errors{syntaxError(file, data, err)}
	}
	d := &decoder{file: file, pos: map[string][2]int{}, given: map[string]bool{}}
	c := &Config{}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	d.decode(doc, reflect.ValueOf(c).Elem(), "")
	defaults{given: d.given}.config(c)
	resolveFiles(c, filepath.Dir(file))
	v := &validator{decoder: d, decoded: len(d.errs)}
	v.config(c)
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	return c, nil
}

// syntaxError turns the YAML parser's error into an Error at the position
// where the parser stopped, naming the construct it was in and where that
// began ("while parsing a flow sequence started at 1:6"). When the parser
// stopped at the end of the file, the position is where the unfinished
// construct began.
func syntaxError(file string, data []byte, err error) *Error {
	var le *yaml.LoadError
	if !errors.As(err, &le) {
		return &Error{File: file, Msg: err.Error()}
	}
	e := &Error{File: file, Line: le.Mark.Line, Col: le.Mark.Column, Msg: "invalid YAML: " + le.Message}
	cm := le.ContextMark
	switch {
	case le.ContextMsg == "":
	case cm.Line > 0 && le.Mark.Index >= len(data):
		e.Line, e.Col = cm.Line, cm.Column
		if !strings.Contains(le.Message, "end of stream") {
			e.Msg += " before the end of the file"
		}
		e.Msg += " (" + le.ContextMsg + " that starts here)"
	case cm.Line > 0 && cm != le.Mark:
		e.Msg += fmt.Sprintf(" (%s started at %d:%d)", le.ContextMsg, cm.Line, cm.Column)
	default:
		e.Msg += " (" + le.ContextMsg + ")"
	}
	return e
}

// resolveFiles makes the file paths of c that are relative to the
// configuration file's directory dir usable from any working directory.
func resolveFiles(c *Config, dir string) {
	for _, p := range filePaths(c) {
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// Files returns the paths of the files c names, which a gateway reads
// when it applies c: the TLS listener's certificates and keys, then the
// upstreams' CA bundles, certificates and keys by upstream name; each
// once.
func (c *Config) Files() []string {
	var files []string
	for _, p := range filePaths(c) {
		if !slices.Contains(files, *p) {
			files = append(files, *p)
		}
	}
	return files
}

// filePaths returns pointers to the file paths c sets.
func filePaths(c *Config) []*string {
	var ps []*string
	add := func(p *string) {
		if *p != "" {
			ps = append(ps, p)
		}
	}
	if c.TLS != nil {
		for i := range c.TLS.Certificates {
			add(&c.TLS.Certificates[i].CertFile)
			add(&c.TLS.Certificates[i].KeyFile)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
		if u := c.Upstreams[name]; u != nil && u.TLS != nil {
			add(&u.TLS.CAFile)
			add(&u.TLS.CertFile)
			add(&u.TLS.KeyFile)
		}
	}
	return ps
}
