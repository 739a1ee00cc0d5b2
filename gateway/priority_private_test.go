package gateway

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/http1"
)

// TestPriorityClass checks how a request's class is found: the header's
// value through values, else the default; a route-level class reads no
// header.
func TestPriorityClass(t *testing.T) {
	tiers := &config.Priority{From: config.Source{Kind: config.SourceHeader, Header: "X-Tier"}, Default: "normal",
		Values: map[string]string{"gold": "critical", "free": "best_effort"}}
	route := &config.Priority{From: config.Source{Kind: config.SourceRoute}, Default: "critical"}
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

// TestPriorityRepeatedHeader checks, for the request readers of both
// engines (fasthttp's for the goroutine engine, http1.Request for the loops),
// that a priority header sent more than once gives the least important
// class of its values, an unmapped value counting as the default: a client
// that adds its own header before the one a proxy appends cannot raise its
// class. (The first value won: "gold" before a proxy's "free" was
// critical.)
func TestPriorityRepeatedHeader(t *testing.T) {
	p := newPriorities(&config.Priority{From: config.Source{Kind: config.SourceHeader, Header: "X-Tier"}, Default: "normal",
		Values: map[string]string{"gold": "critical", "free": "best_effort"}})
	for _, tt := range []struct {
		values []string
		want   concurrency.Priority
	}{
		{[]string{"gold"}, concurrency.Critical},
		{[]string{"gold", "free"}, concurrency.BestEffort},
		{[]string{"free", "gold"}, concurrency.BestEffort},
		{[]string{"gold", "gold"}, concurrency.Critical},
		{[]string{"gold", "junk"}, concurrency.Normal},
		{[]string{"gold", "gold", "gold", "gold", "gold", "gold", "gold", "gold", "gold", "gold"}, concurrency.BestEffort}, // past maxPriorityValues
	} {
		var req fasthttp.Request
		head := "GET / HTTP/1.1\nHost: a:1\n"
		for _, v := range tt.values {
			req.Header.Add("X-Tier", v)
			head += "x-tier: " + v + "\n"
		}
		var h http1.Request
		if !http1.ParseRequest([]byte(strings.ReplaceAll(head+"\n", "\n", "\r\n")), &h) {
			t.Fatalf("%q: refused", head)
		}
		for name, r := range map[string]request{"goroutine": fastRequest{&req}, "loop": &h} {
			if got := p.class(r); got != tt.want {
				t.Errorf("%s engine, X-Tier %q: class %v, want %v", name, tt.values, got, tt.want)
			}
			if n := testing.AllocsPerRun(10, func() { p.of(r) }); n != 0 {
				t.Errorf("%s engine, X-Tier %q: %v allocations, want none", name, tt.values, n)
			}
		}
	}
}
