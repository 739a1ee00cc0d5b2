package config

import "time"

// Defaults, as documented on the fields.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultAdminListen = "127.0.0.1:9901"
	DefaultRedisAddr   = "127.0.0.1:6379"
	// DefaultSentinelAddr is the default of store.redis.addrs when
	// store.redis.sentinel is set.
	DefaultSentinelAddr = "127.0.0.1:26379"
)

func (c *Config) applyDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	defInt := func(i *int, v int) {
		if *i == 0 {
			*i = v
		}
	}
	defDur := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	def(&c.Listen, DefaultListen)
	def(&c.Admin.Listen, DefaultAdminListen)
	def(&c.Store.Kind, "memory")
	if len(c.Store.Redis.Addrs) == 0 {
		c.Store.Redis.Addrs = []string{DefaultRedisAddr}
		if c.Store.Redis.Sentinel != "" {
			c.Store.Redis.Addrs = []string{DefaultSentinelAddr}
		}
	}
	def(&c.Store.Redis.OnError, "local")
	defDur(&c.Store.Redis.Timeout, 50*time.Millisecond)
	def(&c.Store.Redis.Prefix, "sluice")
	defDur(&c.Server.ReadHeaderTimeout, 10*time.Second)
	defDur(&c.Server.ReadTimeout, 60*time.Second)
	defDur(&c.Server.IdleTimeout, 120*time.Second)
	defDur(&c.Server.WriteTimeout, 60*time.Second)
	defInt(&c.Server.MaxHeaderBytes, 32<<10)
	defDur(&c.Server.ShutdownTimeout, 30*time.Second)
	def(&c.Server.Engine, "loop")
	def(&c.Log.Format, "json")
	def(&c.Log.Level, "info")
	if c.Log.Sample == 0 {
		c.Log.Sample = 1
	}
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		def(&u.Balance, "round_robin")
		defDur(&u.IdleTimeout, 4*time.Second)
		defDur(&u.ConnectTimeout, 5*time.Second)
		defDur(&u.ResponseHeaderTimeout, 60*time.Second)
		if u.Health != nil {
			defDur(&u.Health.Interval, 5*time.Second)
			defDur(&u.Health.Timeout, time.Second)
		}
	}
	for _, r := range c.Routes {
		if r == nil {
			continue
		}
		def(&r.Match.PathPrefix, "/")
		r.Policies.applyDefaults()
	}
}

func (p *Policies) applyDefaults() {
	if rl := p.RateLimit; rl != nil {
		if rl.Algorithm == "" {
			rl.Algorithm = "gcra"
		}
		if rl.Period == 0 {
			rl.Period = Duration(time.Second)
		}
		if rl.Burst == 0 {
			rl.Burst = rl.Limit
		}
		if rl.Key == "" {
			rl.Key = "ip"
		}
	}
	if a := p.Concurrency; a != nil && a.Adaptive != nil {
		ad := a.Adaptive
		if ad.Algorithm == "" {
			ad.Algorithm = "default"
		}
		if ad.Min == 0 {
			ad.Min = 1
		}
		if ad.Max == 0 {
			ad.Max = 1000
		}
		if ad.Initial == 0 {
			ad.Initial = min(max(20, ad.Min), ad.Max)
		}
	}
	if cb := p.CircuitBreaker; cb != nil {
		if cb.FailureRate == 0 && cb.ConsecutiveFailures == 0 && cb.SlowCall == nil {
			cb.FailureRate = 0.5
		}
		if cb.SlowCall != nil && cb.SlowCall.Rate == 0 {
			cb.SlowCall.Rate = 1
		}
		if cb.Window.Kind == "" {
			cb.Window.Kind = "count"
		}
		if cb.Window.Size == "" {
			if cb.Window.Kind == "time" {
				cb.Window.Size = "10s"
			} else {
				cb.Window.Size = "100"
			}
		}
		if cb.MinCalls == 0 {
			cb.MinCalls = 20
		}
		if cb.OpenFor == 0 {
			cb.OpenFor = Duration(5 * time.Second)
		}
		if cb.HalfOpenCalls == 0 {
			cb.HalfOpenCalls = 3
		}
	}
	if r := p.Retry; r != nil {
		if r.Attempts == 0 {
			r.Attempts = 3
		}
		if r.Backoff.Initial == 0 {
			r.Backoff.Initial = Duration(50 * time.Millisecond)
		}
		if r.Backoff.Max == 0 {
			r.Backoff.Max = Duration(time.Second)
		}
		if r.Backoff.Jitter == "" {
			r.Backoff.Jitter = "full"
		}
		if len(r.On) == 0 {
			r.On = []string{"connect_error", "502", "503", "504"}
		}
		if r.Budget == 0 {
			r.Budget = 0.2
		}
	}
	if f := p.Fallback; f != nil {
		if f.Status == 0 {
			f.Status = 503
		}
		if f.ContentType == "" {
			f.ContentType = "application/json"
		}
	}
}
