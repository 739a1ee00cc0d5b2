package config

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Defaults, as documented on the fields.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultAdminListen = "127.0.0.1:9901"
	DefaultRedisAddr   = "127.0.0.1:6379"
	// DefaultSentinelAddr is the default of store.redis.addrs when
	// store.redis.sentinel is set.
	DefaultSentinelAddr = "127.0.0.1:26379"
	// DefaultStoreMaxKeys is the default of store.max_keys.
	DefaultStoreMaxKeys = 1 << 20
	// DefaultMaxConnections is the default of server.max_connections
	// (see Server.MaxConnections).
	DefaultMaxConnections = 10000
)

// defaults fills in the fields the file does not give. A field is given when
// the file has a value for it other than null; a given value is never
// replaced, so an explicit zero is judged by validation like any other
// value (a period of 0s is an error, not the default 1s).
type defaults struct {
	given map[string]bool // field path → the file gives the field a value
}

func (d defaults) str(path string, s *string, v string) {
	if !d.given[path] {
		*s = v
	}
}

func (d defaults) int(path string, i *int, v int) {
	if !d.given[path] {
		*i = v
	}
}

func (d defaults) float(path string, f *float64, v float64) {
	if !d.given[path] {
		*f = v
	}
}

func (d defaults) dur(path string, p *Duration, v time.Duration) {
	if !d.given[path] {
		*p = Duration(v)
	}
}

func (d defaults) bool(path string, b *bool, v bool) {
	if !d.given[path] {
		*b = v
	}
}

func (d defaults) config(c *Config) {
	d.str("listen", &c.Listen, DefaultListen)
	d.str("admin.listen", &c.Admin.Listen, DefaultAdminListen)
	d.str("store.kind", &c.Store.Kind, "memory")
	d.int("store.max_keys", &c.Store.MaxKeys, DefaultStoreMaxKeys)
	if !d.given["store.redis.addrs"] {
		c.Store.Redis.Addrs = []string{DefaultRedisAddr}
		if c.Store.Redis.Sentinel != "" {
			c.Store.Redis.Addrs = []string{DefaultSentinelAddr}
		}
	}
	if !d.given["store.redis.on_error"] {
		c.Store.Redis.OnError = ratelimit.FailLocal
	}
	d.dur("store.redis.timeout", &c.Store.Redis.Timeout, 50*time.Millisecond)
	d.str("store.redis.prefix", &c.Store.Redis.Prefix, "sluice")
	d.dur("server.read_header_timeout", &c.Server.ReadHeaderTimeout, 10*time.Second)
	d.dur("server.read_timeout", &c.Server.ReadTimeout, 60*time.Second)
	d.dur("server.idle_timeout", &c.Server.IdleTimeout, 120*time.Second)
	d.dur("server.write_timeout", &c.Server.WriteTimeout, 60*time.Second)
	d.int("server.max_header_bytes", &c.Server.MaxHeaderBytes, 32<<10)
	d.int("server.max_held_body_bytes", &c.Server.MaxHeldBodyBytes, 64<<20)
	d.int("server.max_connections", &c.Server.MaxConnections, DefaultMaxConnections)
	d.dur("server.shutdown_timeout", &c.Server.ShutdownTimeout, 30*time.Second)
	d.dur("server.websocket_idle_timeout", &c.Server.WebSocketIdleTimeout, 5*time.Minute)
	d.dur("server.grpc_idle_timeout", &c.Server.GRPCIdleTimeout, 5*time.Minute)
	d.str("server.engine", &c.Server.Engine, "loop")
	d.int("server.http2.max_concurrent_streams", &c.Server.HTTP2.MaxConcurrentStreams, 250)
	d.int("server.http2.max_stream_buffer_bytes", &c.Server.HTTP2.MaxStreamBufferBytes, 1<<20)
	d.int("server.http2.max_websockets_per_connection", &c.Server.HTTP2.MaxWebSocketsPerConnection, 100)
	d.bool("server.http2.loops", &c.Server.HTTP2.Loops, c.Server.Engine == "loop")
	if c.TLS != nil {
		d.str("tls.min_version", &c.TLS.MinVersion, "1.2")
	}
	d.str("log.format", &c.Log.Format, "json")
	d.str("log.level", &c.Log.Level, "info")
	d.float("log.sample", &c.Log.Sample, 1)
	d.tracing(c.Tracing)
	for name, u := range c.Upstreams {
		if u == nil {
			continue
		}
		p := "upstreams." + name
		d.str(p+".balance", &u.Balance, "round_robin")
		d.str(p+".protocol", &u.Protocol, "http1")
		d.dur(p+".idle_timeout", &u.IdleTimeout, 4*time.Second)
		d.dur(p+".connect_timeout", &u.ConnectTimeout, 5*time.Second)
		d.dur(p+".response_header_timeout", &u.ResponseHeaderTimeout, 60*time.Second)
		if u.Health != nil {
			d.dur(p+".health.interval", &u.Health.Interval, 5*time.Second)
			d.dur(p+".health.timeout", &u.Health.Timeout, time.Second)
		}
	}
	for i, r := range c.Routes {
		if r == nil {
			continue
		}
		p := fmt.Sprintf("routes[%d]", i)
		d.str(p+".match.path_prefix", &r.Match.PathPrefix, "/")
		d.policies(p+".policies", &r.Policies)
	}
}

func (d defaults) policies(path string, p *Policies) {
	if rl := p.RateLimit; rl != nil {
		rp := path + ".rate_limit"
		d.str(rp+".algorithm", &rl.Algorithm, "gcra")
		d.dur(rp+".period", &rl.Period, time.Second)
		d.int(rp+".burst", &rl.Burst, rl.Limit)
		d.int(rp+".ipv6_prefix", &rl.IPv6Prefix, 64)
	}
	if c := p.Concurrency; c != nil && c.Adaptive != nil {
		ap, ad := path+".concurrency.adaptive", c.Adaptive
		d.str(ap+".algorithm", &ad.Algorithm, "default")
		d.int(ap+".min", &ad.Min, 1)
		d.int(ap+".max", &ad.Max, 1000)
		d.int(ap+".initial", &ad.Initial, min(max(20, ad.Min), ad.Max))
	}
	if cb := p.CircuitBreaker; cb != nil {
		bp := path + ".circuit_breaker"
		if cb.ConsecutiveFailures == 0 && cb.SlowCall == nil {
			d.float(bp+".failure_rate", &cb.FailureRate, 0.5)
		}
		if cb.SlowCall != nil {
			d.float(bp+".slow_call.rate", &cb.SlowCall.Rate, 1)
		}
		d.str(bp+".window.kind", &cb.Window.Kind, "count")
		if cb.Window.Kind == "time" {
			d.str(bp+".window.size", &cb.Window.Size, "10s")
		} else {
			d.str(bp+".window.size", &cb.Window.Size, "100")
		}
		minCalls := 20
		if n, err := strconv.Atoi(cb.Window.Size); err == nil && cb.Window.Kind == "count" && n > 0 {
			minCalls = min(minCalls, n) // a window of fewer calls is judged when full
		}
		d.int(bp+".min_calls", &cb.MinCalls, minCalls)
		d.dur(bp+".open_for", &cb.OpenFor, 5*time.Second)
		d.int(bp+".half_open_calls", &cb.HalfOpenCalls, 3)
	}
	if r := p.Retry; r != nil {
		rp := path + ".retry"
		d.int(rp+".attempts", &r.Attempts, 3)
		d.dur(rp+".backoff.initial", &r.Backoff.Initial, 50*time.Millisecond)
		d.dur(rp+".backoff.max", &r.Backoff.Max, time.Second)
		if !d.given[rp+".on"] {
			r.On = []RetryOn{RetryConnectError, 502, 503, 504}
		}
		d.float(rp+".budget", &r.Budget, 0.2)
	}
	d.flow(path, p)
}
