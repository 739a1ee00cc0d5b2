package gateway

import (
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// sentinelRefresh is how often a Sentinel client checks with the Sentinels
// which server is the master, besides following their +switch-master
// events.
const sentinelRefresh = 5 * time.Second

// newStore opens the rate-limit store the configuration asks for: memory,
// or Redis (a server, a Cluster, or the master of a Sentinel set) with the
// operator's choice of what to do while Redis cannot answer (open: admit;
// closed: reject; local: apply the same limits in this process's memory).
// The memory store holds at most store.max_keys keys and counts what it
// evicts in the gateway's metrics.
func newStore(c config.Store, g *Gateway) (*store, error) {
	mem := ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: g.clock, MaxKeys: c.MaxKeys, Evictions: g.metrics.StoreEvictions()})
	if c.Kind == "memory" {
		return &store{Store: mem}, nil
	}
	co := rueidis.ClientOption{InitAddress: c.Redis.Addrs, Password: c.Redis.Password}
	if c.Redis.Sentinel != "" {
		// The client follows the master the Sentinels name, told of a
		// failover by +switch-master; the periodic check recovers from a
		// missed event, which would otherwise leave the client on a demoted
		// master (READONLY) until a restart.
		co.Sentinel = rueidis.SentinelOption{MasterSet: c.Redis.Sentinel, TopologyRefreshInterval: sentinelRefresh}
	}
	rs, err := redisstore.DialClient(co, redisstore.Options{
		Prefix:   c.Redis.Prefix,
		Timeout:  c.Redis.Timeout.D(),
		OnError:  c.Redis.OnError,
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
