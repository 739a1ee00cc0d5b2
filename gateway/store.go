package gateway

import (
	"fmt"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ratelimit"
)

// newStore opens the rate-limit store the configuration asks for.
func newStore(c config.Store, g *Gateway) (*store, error) {
	switch c.Kind {
	case "memory":
		return &store{Store: ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: g.clock})}, nil
	}
	return nil, fmt.Errorf("store: kind %q is not available", c.Kind)
}
