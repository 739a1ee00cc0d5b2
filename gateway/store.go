package gateway

import (
	"fmt"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// newStore opens the rate-limit store the configuration asks for: memory,
// or Redis with the operator's choice of what to do while Redis cannot
// answer (open: admit; closed: reject; local: apply the same limits in this
// process's memory).
func newStore(c config.Store, g *Gateway) (*store, error) {
	mem := ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: g.clock})
	if c.Kind == "memory" {
		return &store{Store: mem}, nil
	}
	mode := map[string]redisstore.ErrorMode{"open": redisstore.FailOpen, "closed": redisstore.FailClosed, "local": redisstore.Local}[c.Redis.OnError]
	rs, err := redisstore.DialClient(rueidis.ClientOption{InitAddress: c.Redis.Addrs, Password: c.Redis.Password}, redisstore.Options{
		Prefix:   c.Redis.Prefix,
		Timeout:  c.Redis.Timeout.D(),
		OnError:  mode,
		Fallback: mem,
		Clock:    g.clock,
		OnRedisError: func(err error) {
			g.log.Warn("redis rate-limit store", "error", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return &store{Store: rs, closeFn: rs.Close}, nil
}
