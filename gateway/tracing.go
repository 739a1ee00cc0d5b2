package gateway

import (
	"fmt"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/buildinfo"
	"github.com/sluicehq/sluice/internal/tracing"
)

// buildTracer returns the tracer of configuration c (nil when tracing is
// off): old's when its tracing section is the same, so that a reload that
// leaves tracing alone keeps its queue of spans, else a new one.
func buildTracer(c *config.Tracing, old *state, g *Gateway) (*tracing.Provider, error) {
	if c == nil {
		return nil, nil
	}
	if old != nil && old.tracer != nil && old.tracer.Config() == *c {
		return old.tracer, nil
	}
	p, err := tracing.New(*c, buildinfo.Read().Version, g.log)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return p, nil
}
