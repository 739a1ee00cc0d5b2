package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v4"

	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/ratelimit"
)

// Names accepted by the enumerated fields.
var (
	RateLimitAlgorithms = []string{"token_bucket", "gcra", "fixed_window", "sliding_log", "sliding_window", "leaky_bucket"}
	AdaptiveAlgorithms  = []string{"default", "aimd", "vegas", "gradient2", "latency_gradient"}
	Balancers           = []string{"round_robin", "least_inflight", "p2c"}
	UpstreamProtocols   = []string{"http1", "h2c", "h2"}
	TLSVersions         = []string{"1.2", "1.3"}
)

// Bounds of values that would otherwise be accepted and then misbehave: a
// health interval of a few nanoseconds keeps a core busy, a timeout over a
// day is a mistake, a huge count window allocates its slots up front.
const (
	// MinDuration and MaxDuration bound every duration in the file, unless
	// its field's documentation says otherwise.
	MinDuration = time.Millisecond
	MaxDuration = 24 * time.Hour
	// MinBackoff bounds a retry's backoff from below: any wait, however
	// short, is allowed, since attempts and the budget bound the retries.
	MinBackoff = time.Nanosecond
	// MinHealthInterval bounds upstreams.*.health.interval from below.
	MinHealthInterval = 100 * time.Millisecond
	// MaxRedisTimeout bounds store.redis.timeout.
	MaxRedisTimeout = time.Minute
	// MinTimeWindow bounds a breaker's time window from below.
	MinTimeWindow = time.Second
	// MaxCountWindow bounds a breaker's count window (a number of calls).
	MaxCountWindow = 100_000
	// MaxAttempts bounds retry.attempts.
	MaxAttempts = 100
)

// validator checks a decoded, defaulted Config; its errors point at the
// positions the decoder recorded.
type validator struct {
	*decoder
	decoded int // the number of decoding errors, which come first in errs
}

// undecoded reports whether path, or a field inside or around it, failed to
// decode; validating it again would only repeat the problem.
func (v *validator) undecoded(path string) bool {
	for _, e := range v.errs[:v.decoded] {
		if e.Field == path || strings.HasPrefix(e.Field, path+".") || strings.HasPrefix(e.Field, path+"[") ||
			strings.HasPrefix(path, e.Field+".") || strings.HasPrefix(path, e.Field+"[") {
			return true
		}
	}
	return false
}

// at reports a problem with the field at path, or with the closest parent
// that was written in the file.
func (v *validator) at(path, format string, args ...any) {
	if v.undecoded(path) {
		return
	}
	p := path
	for {
		if pos, ok := v.pos[p]; ok {
			v.fail(&yaml.Node{Line: pos[0], Column: pos[1]}, path, format, args...)
			return
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			if pos, ok := v.pos[""]; ok {
				v.fail(&yaml.Node{Line: pos[0], Column: pos[1]}, path, format, args...)
			} else {
				v.fail(nil, path, format, args...)
			}
			return
		}
		p = p[:i]
	}
}

func (v *validator) oneOf(path, got string, allowed []string) {
	if !slices.Contains(allowed, got) {
		v.at(path, "%q is not one of %s", got, strings.Join(allowed, ", "))
	}
}

func (v *validator) hostPort(path, addr string) {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		v.at(path, "want host:port, got %q", addr)
	}
}

// duration reports d outside [lo, hi].
func (v *validator) duration(path string, d Duration, lo, hi time.Duration) {
	if d.D() < lo || d.D() > hi {
		v.at(path, "want a duration between %s and %s, got %s", fmtDuration(lo), fmtDuration(hi), fmtDuration(d.D()))
	}
}

// optDuration is duration for a field where 0 means "none".
func (v *validator) optDuration(path string, d Duration, lo, hi time.Duration) {
	if d != 0 {
		v.duration(path, d, lo, hi)
	}
}

// fmtDuration writes d as a Go duration without trailing zero units
// ("24h", not "24h0m0s").
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (v *validator) config(c *Config) {
	v.hostPort("listen", c.Listen)
	v.admin(&c.Admin)
	v.oneOf("store.kind", c.Store.Kind, []string{"memory", "redis"})
	if c.Store.MaxKeys < 1 {
		v.at("store.max_keys", "want at least 1, got %d", c.Store.MaxKeys)
	}
	if len(c.Store.Redis.Addrs) == 0 {
		v.at("store.redis.addrs", "want at least one host:port")
	}
	for i, a := range c.Store.Redis.Addrs {
		v.hostPort(fmt.Sprintf("store.redis.addrs[%d]", i), a)
	}
	v.duration("store.redis.timeout", c.Store.Redis.Timeout, MinDuration, MaxRedisTimeout)
	if c.Store.Redis.Prefix == "" {
		v.at("store.redis.prefix", "want a key prefix such as \"sluice\"")
	} else if strings.ContainsAny(c.Store.Redis.Prefix, ":{}") {
		v.at("store.redis.prefix", "a key prefix has no ':', '{' or '}' (keys are {prefix:key}), got %q", c.Store.Redis.Prefix)
	}
	if strings.IndexFunc(c.Store.Redis.Sentinel, unicode.IsSpace) >= 0 {
		v.at("store.redis.sentinel", "a master set name has no spaces, got %q", c.Store.Redis.Sentinel)
	}
	for i, p := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				v.at(fmt.Sprintf("trusted_proxies[%d]", i), "want a CIDR such as 10.0.0.0/8 or an IP, got %q", p)
			}
		}
	}
	v.oneOf("log.format", c.Log.Format, []string{"json", "text"})
	v.oneOf("log.level", c.Log.Level, []string{"debug", "info", "warn", "error"})
	if c.Log.Sample <= 0 || c.Log.Sample > 1 {
		v.at("log.sample", "want a fraction in (0, 1], got %v", c.Log.Sample)
	}
	v.tracing(c.Tracing)
	if c.Server.MaxHeaderBytes < 1024 || c.Server.MaxHeaderBytes > 1<<20 {
		v.at("server.max_header_bytes", "want between 1024 and 1048576 bytes, got %d", c.Server.MaxHeaderBytes)
	}
	v.oneOf("server.engine", c.Server.Engine, []string{"loop", "goroutine"})
	if n := c.Server.HTTP2.MaxConcurrentStreams; n < 1 || n > 10000 {
		v.at("server.http2.max_concurrent_streams", "want between 1 and 10000, got %d", n)
	}
	if n := c.Server.HTTP2.MaxStreamBufferBytes; n < 64<<10 || n > 4<<20 {
		v.at("server.http2.max_stream_buffer_bytes", "want between 65536 and 4194304 bytes, got %d", n)
	}
	if n := c.Server.HTTP2.MaxWebSocketsPerConnection; n < 1 || n > 10000 {
		v.at("server.http2.max_websockets_per_connection", "want between 1 and 10000, got %d", n)
	}
	if c.TLS != nil {
		v.tls(c.TLS, c.Listen)
	}
	v.duration("server.read_header_timeout", c.Server.ReadHeaderTimeout, MinDuration, MaxDuration)
	v.duration("server.read_timeout", c.Server.ReadTimeout, MinDuration, MaxDuration)
	v.duration("server.idle_timeout", c.Server.IdleTimeout, MinDuration, MaxDuration)
	v.duration("server.shutdown_timeout", c.Server.ShutdownTimeout, MinDuration, MaxDuration)
	v.duration("server.websocket_idle_timeout", c.Server.WebSocketIdleTimeout, MinDuration, MaxDuration)
	v.duration("server.grpc_idle_timeout", c.Server.GRPCIdleTimeout, MinDuration, MaxDuration)
	if c.Server.MaxBodyBytes < 0 {
		v.at("server.max_body_bytes", "cannot be negative")
	}
	if c.Server.MaxHeldBodyBytes < 0 {
		v.at("server.max_held_body_bytes", "cannot be negative")
	}
	if c.Server.MaxConnections < 0 {
		v.at("server.max_connections", "cannot be negative")
	}
	if c.Server.MaxConnectionsPerClient < 0 {
		v.at("server.max_connections_per_client", "cannot be negative")
	}
	for name, u := range c.Upstreams {
		v.upstream("upstreams."+name, u)
	}
	if len(c.Routes) == 0 {
		v.at("routes", "no routes: the gateway would answer 404 to every request")
	}
	names := map[string]bool{}
	for i, r := range c.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		if r == nil {
			v.at(path, "empty route")
			continue
		}
		switch {
		case r.Name == "":
			v.at(path+".name", "a route needs a name")
		case names[r.Name]:
			v.at(path+".name", "route name %q is used twice", r.Name)
		case strings.Contains(r.Name, "|"):
			// The route's rate-limit keys are its name, or its name and
			// "|ip|", "|h|" or "|H|" and the client's part: with a '|' in
			// names, one route's key could be another's.
			v.at(path+".name", "a route name has no '|' (it separates the parts of rate-limit keys), got %q", r.Name)
		}
		names[r.Name] = true
		if r.Upstream == "" {
			v.at(path+".upstream", "a route needs an upstream")
		} else if c.Upstreams[r.Upstream] == nil {
			v.at(path+".upstream", "no upstream named %q", r.Upstream)
		}
		v.match(path+".match", &r.Match)
		v.policies(path+".policies", &r.Policies)
		if r.GRPC != nil {
			v.grpc(path+".grpc", r.GRPC)
		}
		v.flow(path+".policies", r, c)
		if r.Rewrite != nil {
			v.prefix(path+".rewrite.strip_prefix", r.Rewrite.StripPrefix)
			v.prefix(path+".rewrite.add_prefix", r.Rewrite.AddPrefix)
		}
		if h := r.Headers; h != nil {
			v.headerEdit(path+".headers.request", &h.Request)
			v.headerEdit(path+".headers.response", &h.Response)
		}
	}
}

// prefix checks a path prefix of a rewrite: empty (none), or a path that
// starts with "/", does not end with "/", and has only the characters a
// path may have without percent-encoding (RFC 3986).
func (v *validator) prefix(path, p string) {
	if p == "" {
		return
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsFunc(p, func(r rune) bool {
		return r > unicode.MaxASCII || !isPathChar(byte(r))
	}) {
		v.at(path, "want a path such as /v1: starting with /, not ending with /, without spaces, %%, ? or #; got %q", p)
	}
}

// isPathChar reports whether c may appear in a path without
// percent-encoding (RFC 3986 pchar and "/").
func isPathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}

// reservedHeaders are the headers a route's header rules cannot name: the
// gateway writes the framing and hop-by-hop headers itself.
var reservedHeaders = []string{"Content-Length", "Transfer-Encoding", "Host", "Connection", "Keep-Alive",
	"Proxy-Connection", "Te", "Trailer", "Upgrade"}

// cgiName reports whether name n is r with '_' for '-', which a request
// rule's name matches (CGI-style servers read them as one).
func cgiName(r, n string) bool {
	return strings.EqualFold(r, strings.ReplaceAll(n, "_", "-"))
}

// headerEdit checks a route's header rules for one direction: a request
// rule's names are read with '_' as '-' (see HeaderEdit).
func (v *validator) headerEdit(path string, e *HeaderEdit) {
	response := strings.HasSuffix(path, ".response")
	name := func(p, n string) {
		switch {
		case !isToken(n):
			v.at(p, "%q is not a header name (RFC 9110 token: letters, digits and !#$%%&'*+-.^_`|~)", n)
		case slices.ContainsFunc(reservedHeaders, func(r string) bool { return strings.EqualFold(r, n) || !response && cgiName(r, n) }):
			v.at(p, "%s is a framing or hop-by-hop header, which the gateway writes itself", n)
		case response && strings.EqualFold(n, "Date"):
			v.at(p, "a response's Date is the gateway's (the time it leaves)")
		}
	}
	for _, op := range []struct {
		key    string
		fields map[string]string
	}{{"set", e.Set}, {"add", e.Add}} {
		for _, n := range sortedKeys(op.fields) {
			p := path + "." + op.key + "." + n
			name(p, n)
			if !isHeaderValue(op.fields[n]) {
				v.at(p, "a header value has no control characters and no leading or trailing space, got %q", op.fields[n])
			}
		}
	}
	for i, n := range e.Remove {
		name(fmt.Sprintf("%s.remove[%d]", path, i), n)
	}
}

// grpc checks a route's gRPC settings: every idempotent entry is a full
// method name or a service's wildcard.
func (v *validator) grpc(path string, g *GRPC) {
	for i, m := range g.Idempotent {
		if !IsGRPCMethodPattern(m) {
			v.at(fmt.Sprintf("%s.idempotent[%d]", path, i), `want a full method name such as "/pkg.Service/Method" or "/pkg.Service/*", got %q`, m)
		}
	}
}

// IsGRPCMethodPattern reports whether p names gRPC calls as a route's
// grpc.idempotent does: "/service/method" or "/service/*", where service
// and method are not empty and hold no '/', space or control character.
func IsGRPCMethodPattern(p string) bool {
	rest, ok := strings.CutPrefix(p, "/")
	if !ok {
		return false
	}
	svc, method, ok := strings.Cut(rest, "/")
	if !ok || svc == "" || method == "" || strings.Contains(method, "/") {
		return false
	}
	for _, c := range svc + method {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// admin checks the admin API's listener: an address other than loopback
// needs a token, which must be sendable in an Authorization header.
func (v *validator) admin(a *Admin) {
	if a.Listen == "off" {
		return
	}
	v.hostPort("admin.listen", a.Listen)
	if host, _, err := net.SplitHostPort(a.Listen); err == nil && a.Token == "" && !isLoopback(host) {
		v.at("admin.listen", "an admin listener on a non-loopback address needs admin.token (anyone who reaches %q could reload the configuration); listen on 127.0.0.1 or set a token", a.Listen)
	}
	if a.Token != "" && !isToken68(a.Token) {
		v.at("admin.token", "a bearer token has only letters, digits and -._~+/ (then optional =), with no spaces")
	}
}

// tls checks the HTTPS listener's shape; the certificate files themselves
// are read when the configuration is built (gateway.Check).
func (v *validator) tls(t *TLS, plain string) {
	v.hostPort("tls.listen", t.Listen)
	if _, port, _ := net.SplitHostPort(t.Listen); t.Listen == plain && port != "0" { // port 0: each its own free port
		v.at("tls.listen", "%q is the plaintext listen address too", t.Listen)
	}
	if len(t.Certificates) == 0 {
		v.at("tls.certificates", "want at least one certificate (cert_file and key_file)")
	}
	for i, c := range t.Certificates {
		p := fmt.Sprintf("tls.certificates[%d]", i)
		if c.CertFile == "" {
			v.at(p+".cert_file", "want the path of a PEM certificate file")
		}
		if c.KeyFile == "" {
			v.at(p+".key_file", "want the path of a PEM private key file")
		}
	}
	v.oneOf("tls.min_version", t.MinVersion, TLSVersions)
}

func (v *validator) upstream(path string, u *Upstream) {
	if u == nil || len(u.Targets) == 0 {
		v.at(path+".targets", "an upstream needs at least one target")
		return
	}
	for i, t := range u.Targets {
		p := fmt.Sprintf("%s.targets[%d]", path, i)
		tu, err := url.Parse(t)
		switch {
		case err != nil:
			v.at(p, "not a URL: %v", err)
		case tu.Scheme != "http" && tu.Scheme != "https":
			v.at(p, "want an http:// or https:// URL, got %q", t)
		case tu.Host == "":
			v.at(p, "the URL %q has no host", t)
		case tu.Path != "" && tu.Path != "/", tu.RawQuery != "", tu.User != nil:
			v.at(p, "a target is scheme://host:port only, got %q", t)
		}
	}
	v.oneOf(path+".balance", u.Balance, Balancers)
	v.upstreamProtocol(path, u)
	v.duration(path+".idle_timeout", u.IdleTimeout, MinDuration, MaxDuration)
	if h := u.Health; h != nil {
		if !strings.HasPrefix(h.Path, "/") {
			v.at(path+".health.path", "want a path starting with /, got %q", h.Path)
		}
		v.duration(path+".health.interval", h.Interval, MinHealthInterval, MaxDuration)
		v.duration(path+".health.timeout", h.Timeout, MinDuration, MaxDuration)
	}
}

// upstreamProtocol checks that the protocol and TLS settings fit the
// targets' schemes: h2 and tls need https targets, h2c http ones.
func (v *validator) upstreamProtocol(path string, u *Upstream) {
	v.oneOf(path+".protocol", u.Protocol, UpstreamProtocols)
	for i, t := range u.Targets {
		tu, err := url.Parse(t)
		if err != nil {
			continue // reported with the targets
		}
		p := fmt.Sprintf("%s.targets[%d]", path, i)
		switch {
		case u.Protocol == "h2" && tu.Scheme != "https":
			v.at(p, "protocol h2 is HTTP/2 over TLS: want an https:// target, got %q", t)
		case u.Protocol == "h2c" && tu.Scheme != "http":
			v.at(p, "protocol h2c is HTTP/2 without TLS: want an http:// target, got %q (use h2 for https)", t)
		case u.TLS != nil && tu.Scheme != "https":
			v.at(p, "tls is set: want an https:// target, got %q", t)
		}
	}
	if t := u.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		v.at(path+".tls", "a client certificate needs both cert_file and key_file")
	}
}

func (v *validator) match(path string, m *Match) {
	if !strings.HasPrefix(m.PathPrefix, "/") {
		v.at(path+".path_prefix", "want a path starting with /, got %q", m.PathPrefix)
	}
	for i, meth := range m.Methods {
		if !isToken(meth) || strings.ToUpper(meth) != meth {
			v.at(fmt.Sprintf("%s.methods[%d]", path, i), "want an upper-case method such as GET, got %q", meth)
		}
	}
	if m.Host != "" {
		if msg := checkHost(m.Host); msg != "" {
			v.at(path+".host", "%s, got %q", msg, m.Host)
		}
	}
	for _, name := range sortedKeys(m.Headers) {
		hp := path + ".headers." + name
		if !isToken(name) {
			v.at(hp, "%q is not a header name (RFC 9110 token: letters, digits and !#$%%&'*+-.^_`|~)", name)
		} else if strings.Count(name, "-")+strings.Count(name, "_") > MaxKeyHeaderSeparators {
			v.at(hp, "%q has more than %d '-' or '_'", name, MaxKeyHeaderSeparators)
		}
		if !isHeaderValue(m.Headers[name]) {
			v.at(hp, "a header value has no control characters and no leading or trailing space, got %q", m.Headers[name])
		} else if strings.Contains(m.Headers[name], ",") && !http1.OneValue([]byte(name)) {
			v.at(hp, "a comma makes %s a list, which no request is routed by (400 ambiguous_header), got %q", name, m.Headers[name])
		}
	}
}

func (v *validator) policies(path string, p *Policies) {
	if rl := p.RateLimit; rl != nil {
		rp := path + ".rate_limit"
		v.oneOf(rp+".algorithm", rl.Algorithm, RateLimitAlgorithms)
		if rl.Limit <= 0 {
			v.at(rp+".limit", "want a limit above 0, got %d", rl.Limit)
		}
		if rl.Burst < 1 && rl.Limit > 0 { // a default burst is the limit, reported above
			v.at(rp+".burst", "want a burst of at least 1, got %d", rl.Burst)
		}
		if name := rl.Key.Header; strings.Count(name, "-")+strings.Count(name, "_") > MaxKeyHeaderSeparators {
			v.at(rp+".key", "%q has more than %d '-' or '_'", name, MaxKeyHeaderSeparators)
		}
		if rl.IPv6Prefix < 32 || rl.IPv6Prefix > 128 {
			v.at(rp+".ipv6_prefix", "want a prefix length from 32 to 128, got %d", rl.IPv6Prefix)
		}
		if rl.Period.D() < MinDuration {
			v.at(rp+".period", "want a period of at least %s, got %s", fmtDuration(MinDuration), fmtDuration(rl.Period.D()))
		} else if rl.Limit > 0 && rl.Burst > 0 && slices.Contains(RateLimitAlgorithms, rl.Algorithm) {
			lim := ratelimit.Limit{Algorithm: ratelimit.Algorithm(rl.Algorithm), Limit: rl.Limit, Period: rl.Period.D(), Burst: rl.Burst}
			if err := lim.Validate(); err != nil {
				v.at(rp+".period", "limit %d per %s with burst %d cannot be kept: %s", rl.Limit, fmtDuration(rl.Period.D()), rl.Burst,
					strings.TrimPrefix(strings.TrimPrefix(err.Error(), ratelimit.ErrInvalidLimit.Error()), ": "))
			}
		}
	}
	v.optDuration(path+".timeout", p.Timeout, MinDuration, MaxDuration)
	if c := p.Concurrency; c != nil {
		cp := path + ".concurrency"
		switch {
		case c.Adaptive != nil && c.Max != 0:
			v.at(cp, "give either max (a static limit) or adaptive, not both")
		case c.Adaptive == nil && c.Max <= 0:
			v.at(cp+".max", "want max above 0 or an adaptive limit")
		}
		if c.Queue < 0 {
			v.at(cp+".queue", "a queue cannot be negative")
		}
		v.optDuration(cp+".max_wait", c.MaxWait, MinDuration, MaxDuration)
		if a := c.Adaptive; a != nil {
			v.oneOf(cp+".adaptive.algorithm", a.Algorithm, AdaptiveAlgorithms)
			if a.Min < 1 || a.Max < a.Min || a.Initial < a.Min || a.Initial > a.Max {
				v.at(cp+".adaptive", "want 1 <= min <= initial <= max, got min %d, initial %d, max %d", a.Min, a.Initial, a.Max)
			}
		}
	}
	if cb := p.CircuitBreaker; cb != nil {
		v.breaker(path+".circuit_breaker", cb)
	}
	if r := p.Retry; r != nil {
		rp := path + ".retry"
		if r.Attempts < 1 || r.Attempts > MaxAttempts {
			v.at(rp+".attempts", "want between 1 and %d attempts, got %d", MaxAttempts, r.Attempts)
		}
		v.duration(rp+".backoff.initial", r.Backoff.Initial, MinBackoff, MaxDuration)
		v.duration(rp+".backoff.max", r.Backoff.Max, MinBackoff, MaxDuration)
		if len(r.On) == 0 {
			v.at(rp+".on", "want at least one of connect_error, timeout or a status code")
		}
		if r.Backoff.Max < r.Backoff.Initial {
			v.at(rp+".backoff.max", "max (%v) is below initial (%v)", r.Backoff.Max.D(), r.Backoff.Initial.D())
		}
		if r.Budget <= 0 || r.Budget > 1 {
			v.at(rp+".budget", "want a fraction in (0, 1], got %v", r.Budget)
		}
	}
	if len(p.CoalesceVary) > 0 && !p.Coalesce {
		v.at(path+".coalesce_vary", "needs coalesce: true")
	}
	for i, h := range p.CoalesceVary {
		if !isToken(h) {
			v.at(fmt.Sprintf("%s.coalesce_vary[%d]", path, i), "want a header name, got %q", h)
		}
	}
	if f := p.Fallback; f != nil {
		if f.Status < 200 || f.Status > 599 {
			v.at(path+".fallback.status", "want a final status code (200 to 599), got %d", f.Status)
		}
		if f.ContentType == "" || !isHeaderValue(f.ContentType) {
			v.at(path+".fallback.content_type", "want a media type such as application/json, got %q", f.ContentType)
		}
	}
}

func (v *validator) breaker(path string, cb *CircuitBreaker) {
	if cb.FailureRate < 0 || cb.FailureRate > 1 {
		v.at(path+".failure_rate", "want a fraction in [0, 1], got %v", cb.FailureRate)
	}
	if cb.ConsecutiveFailures < 0 {
		v.at(path+".consecutive_failures", "cannot be negative")
	}
	if cb.FailureRate == 0 && cb.ConsecutiveFailures == 0 && cb.SlowCall == nil {
		v.at(path+".failure_rate", "the breaker could never open: failure_rate is 0 and neither consecutive_failures nor slow_call is set")
	}
	if s := cb.SlowCall; s != nil {
		if s.Threshold == 0 {
			v.at(path+".slow_call.threshold", "a slow-call threshold is required")
		} else {
			v.duration(path+".slow_call.threshold", s.Threshold, MinDuration, MaxDuration)
		}
		if s.Rate <= 0 || s.Rate > 1 {
			v.at(path+".slow_call.rate", "want a fraction in (0, 1], got %v", s.Rate)
		}
	}
	switch cb.Window.Kind {
	case "count":
		n, err := strconv.Atoi(cb.Window.Size)
		switch {
		case err != nil || n < 1 || n > MaxCountWindow:
			v.at(path+".window.size", "a count window's size is a number of calls from 1 to %d, got %q", MaxCountWindow, cb.Window.Size)
		case cb.MinCalls > n:
			v.at(path+".min_calls", "min_calls %d exceeds the window's %d calls: the rates could never be judged", cb.MinCalls, n)
		default:
			cb.Window.Calls = n
		}
	case "time":
		d, err := time.ParseDuration(cb.Window.Size)
		if err != nil || d < MinTimeWindow || d > MaxDuration {
			v.at(path+".window.size", "a time window's size is a duration between %s and %s, got %q", fmtDuration(MinTimeWindow), fmtDuration(MaxDuration), cb.Window.Size)
		} else {
			cb.Window.Span = Duration(d)
		}
	default:
		v.at(path+".window.kind", "%q is not one of count, time", cb.Window.Kind)
	}
	if cb.MinCalls < 1 {
		v.at(path+".min_calls", "want at least 1, got %d", cb.MinCalls)
	}
	v.duration(path+".open_for", cb.OpenFor, MinDuration, MaxDuration)
	if cb.HalfOpenCalls < 1 {
		v.at(path+".half_open_calls", "want at least 1, got %d", cb.HalfOpenCalls)
	}
}
