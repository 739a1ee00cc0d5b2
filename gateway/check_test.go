package gateway_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

// TestCheck checks that Check refuses, with New's own error, configurations
// New refuses (made in code: config validation refuses each of them in a
// file), and accepts one New cannot build only for want of Redis, which
// Check does not connect to.
func TestCheck(t *testing.T) {
	const text = `
upstreams: {up: {targets: ["http://127.0.0.1:1"]}}
routes:
  - name: r
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, burst: 10}
      circuit_breaker: {window: {kind: time, size: 10s}}
      concurrency: {adaptive: {min: 2, max: 10, initial: 5}}
`
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"rate-limit horizon", func(c *config.Config) {
			c.Routes[0].Policies.RateLimit.Period = config.Duration(200000 * time.Hour)
		}, "reaches beyond 73 years"},
		{"breaker time window of 1ns", func(c *config.Config) {
			c.Routes[0].Policies.CircuitBreaker.Window.Span = config.Duration(time.Nanosecond)
		}, "TimeWindow 1ns is shorter than Buckets"},
		{"adaptive min above max", func(c *config.Config) {
			c.Routes[0].Policies.Concurrency.Adaptive.Min = 20
		}, "MinLimit 20 > MaxLimit 10"},
	}
	log := slog.New(slog.DiscardHandler)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parseConfig(t, text)
			tt.mutate(cfg)
			_, newErr := gateway.New(cfg, gateway.Options{Logger: log})
			if newErr == nil || !strings.Contains(newErr.Error(), tt.want) {
				t.Fatalf("New: %v, want an error with %q", newErr, tt.want)
			}
			if err := gateway.Check(cfg); err == nil || err.Error() != newErr.Error() {
				t.Errorf("Check: %v, want New's error %q", err, newErr)
			}
		})
	}

	t.Run("no Redis connection", func(t *testing.T) {
		// Check never dials the store (New would, and start degraded).
		cfg := parseConfig(t, "store: {kind: redis, redis: {addrs: [\"127.0.0.1:1\"]}}\n"+text)
		if err := gateway.Check(cfg); err != nil {
			t.Errorf("Check: %v", err)
		}
	})
	t.Run("valid", func(t *testing.T) {
		cfg := parseConfig(t, text)
		if err := gateway.Check(cfg); err != nil {
			t.Fatalf("Check: %v", err)
		}
		g, err := gateway.New(cfg, gateway.Options{Logger: log})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
}
