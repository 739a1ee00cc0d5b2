package gateway

import (
	"log/slog"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
)

// Check builds everything New builds for cfg (every upstream pool, every
// route and each of its policies, the TLS listener's certificates and the
// upstreams' client TLS, whose files it reads) and then releases it,
// returning the error New would return. It does not listen, connect to Redis (a Redis store is
// checked as a memory store) or start health checks, so it needs no network:
// sluice validate calls it after config.Load, so that a file that validates
// is one that serves.
func Check(cfg *config.Config) error {
	c := *cfg
	c.Store.Kind = "memory"
	c.Upstreams = make(map[string]*config.Upstream, len(cfg.Upstreams))
	for name, u := range cfg.Upstreams {
		if u != nil {
			cu := *u
			cu.Health = nil
			u = &cu
		}
		c.Upstreams[name] = u
	}
	g := &Gateway{log: slog.New(slog.DiscardHandler), clock: clock.Real}
	st, err := buildState(&c, nil, g)
	if err != nil {
		return err
	}
	st.close(nil)
	return nil
}
