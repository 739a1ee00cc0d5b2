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

	"go.yaml.in/yaml/v3"
)

// Names accepted by the enumerated fields.
var (
	RateLimitAlgorithms = []string{"token_bucket", "gcra", "fixed_window", "sliding_log", "sliding_window", "leaky_bucket"}
	AdaptiveAlgorithms  = []string{"default", "aimd", "vegas", "gradient2", "latency_gradient"}
	Balancers           = []string{"round_robin", "least_inflight", "p2c"}
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

func (v *validator) config(c *Config) {
	v.hostPort("listen", c.Listen)
	if c.Admin.Listen != "off" {
		v.hostPort("admin.listen", c.Admin.Listen)
	}
	v.oneOf("store.kind", c.Store.Kind, []string{"memory", "redis"})
	v.oneOf("store.redis.on_error", c.Store.Redis.OnError, []string{"open", "closed", "local"})
	for i, a := range c.Store.Redis.Addrs {
		v.hostPort(fmt.Sprintf("store.redis.addrs[%d]", i), a)
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
	if c.Server.MaxHeaderBytes < 1024 || c.Server.MaxHeaderBytes > 1<<20 {
		v.at("server.max_header_bytes", "want between 1024 and 1048576 bytes, got %d", c.Server.MaxHeaderBytes)
	}
	v.oneOf("server.engine", c.Server.Engine, []string{"loop", "goroutine"})
	if c.Server.MaxBodyBytes < 0 {
		v.at("server.max_body_bytes", "cannot be negative")
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
		}
		names[r.Name] = true
		if r.Upstream == "" {
			v.at(path+".upstream", "a route needs an upstream")
		} else if c.Upstreams[r.Upstream] == nil {
			v.at(path+".upstream", "no upstream named %q", r.Upstream)
		}
		v.match(path+".match", &r.Match)
		v.policies(path+".policies", &r.Policies)
	}
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
	if u.IdleTimeout < 0 {
		v.at(path+".idle_timeout", "cannot be negative")
	}
	if h := u.Health; h != nil && !strings.HasPrefix(h.Path, "/") {
		v.at(path+".health.path", "want a path starting with /, got %q", h.Path)
	}
}

func (v *validator) match(path string, m *Match) {
	if !strings.HasPrefix(m.PathPrefix, "/") {
		v.at(path+".path_prefix", "want a path starting with /, got %q", m.PathPrefix)
	}
	for i, meth := range m.Methods {
		if meth == "" || strings.ToUpper(meth) != meth || strings.ContainsAny(meth, " \t/") {
			v.at(fmt.Sprintf("%s.methods[%d]", path, i), "want an upper-case method such as GET, got %q", meth)
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
		if rl.Burst < 0 {
			v.at(rp+".burst", "a burst cannot be negative")
		}
		if rl.Key != "ip" && rl.Key != "route" && (!strings.HasPrefix(rl.Key, "header:") || len(rl.Key) == len("header:")) {
			v.at(rp+".key", `want "ip", "route" or "header:NAME", got %q`, rl.Key)
		}
	}
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
		if r.Attempts < 1 {
			v.at(rp+".attempts", "want at least 1 attempt, got %d", r.Attempts)
		}
		if r.Backoff.Max < r.Backoff.Initial {
			v.at(rp+".backoff.max", "max (%v) is below initial (%v)", r.Backoff.Max.D(), r.Backoff.Initial.D())
		}
		v.oneOf(rp+".backoff.jitter", r.Backoff.Jitter, []string{"full", "equal", "none"})
		for i, on := range r.On {
			if on == "connect_error" || on == "timeout" {
				continue
			}
			if code, err := strconv.Atoi(on); err != nil || code < 100 || code > 599 {
				v.at(fmt.Sprintf("%s.on[%d]", rp, i), "want connect_error, timeout or a status code, got %q", on)
			}
		}
		if r.Budget <= 0 || r.Budget > 1 {
			v.at(rp+".budget", "want a fraction in (0, 1], got %v", r.Budget)
		}
	}
	if f := p.Fallback; f != nil && (f.Status < 100 || f.Status > 599) {
		v.at(path+".fallback.status", "want a status code, got %d", f.Status)
	}
}

func (v *validator) breaker(path string, cb *CircuitBreaker) {
	if cb.FailureRate < 0 || cb.FailureRate > 1 {
		v.at(path+".failure_rate", "want a fraction in [0, 1], got %v", cb.FailureRate)
	}
	if cb.ConsecutiveFailures < 0 {
		v.at(path+".consecutive_failures", "cannot be negative")
	}
	if s := cb.SlowCall; s != nil {
		if s.Threshold <= 0 {
			v.at(path+".slow_call.threshold", "a slow-call threshold is required")
		}
		if s.Rate <= 0 || s.Rate > 1 {
			v.at(path+".slow_call.rate", "want a fraction in (0, 1], got %v", s.Rate)
		}
	}
	switch cb.Window.Kind {
	case "count":
		if n, err := strconv.Atoi(cb.Window.Size); err != nil || n < 1 {
			v.at(path+".window.size", "a count window's size is a number of calls, got %q", cb.Window.Size)
		}
	case "time":
		if d, err := time.ParseDuration(cb.Window.Size); err != nil || d <= 0 {
			v.at(path+".window.size", "a time window's size is a duration such as \"10s\", got %q", cb.Window.Size)
		}
	default:
		v.at(path+".window.kind", "%q is not one of count, time", cb.Window.Kind)
	}
	if cb.MinCalls < 1 {
		v.at(path+".min_calls", "want at least 1, got %d", cb.MinCalls)
	}
	if cb.HalfOpenCalls < 1 {
		v.at(path+".half_open_calls", "want at least 1, got %d", cb.HalfOpenCalls)
	}
}
