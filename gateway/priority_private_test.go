package gateway

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/config"
)

// TestPriorityClass checks how a request's class is found: the header's
// value through values, else the default; a route-level class reads no
// header.
func TestPriorityClass(t *testing.T) {
	tiers := &config.Priority{From: "header:X-Tier", Default: "normal",
		Values: map[string]string{"gold": "critical", "free": "best_effort"}}
	route := &config.Priority{From: "route", Default: "critical"}
	for _, tt := range []struct {
		cfg    *config.Priority
		header string // X-Tier's value; "" for none
		want   concurrency.Priority
	}{
		{tiers, "gold", concurrency.Critical},
		{tiers, "free", concurrency.BestEffort},
		{tiers, "", concurrency.Normal},
		{tiers, "critical", concurrency.Normal}, // not in values: a class's name is no value of its own here
		{tiers, "GOLD", concurrency.Normal},     // values are matched exactly
		{route, "free", concurrency.Critical},
		{route, "", concurrency.Critical},
	} {
		var req fasthttp.Request
		if tt.header != "" {
			req.Header.Set("X-Tier", tt.header)
		}
		p := newPriorities(tt.cfg)
		ctx := p.of(fastRequest{&req})
		if got := concurrency.PriorityFrom(ctx); got != tt.want {
			t.Errorf("from %s, X-Tier %q: class %v, want %v", tt.cfg.From, tt.header, got, tt.want)
		}
		if n := testing.AllocsPerRun(10, func() { p.of(fastRequest{&req}) }); n != 0 {
			t.Errorf("from %s, X-Tier %q: %v allocations, want none", tt.cfg.From, tt.header, n)
		}
	}
}
