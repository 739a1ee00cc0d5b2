package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

// TestValidateRefusesWhatServeRefuses checks files that `sluice validate`
// used to pass and `sluice serve` then refused to build (or built with a
// value that spins a core or allocates gigabytes): validate now refuses
// each, naming the file, line, column and field.
func TestValidateRefusesWhatServeRefuses(t *testing.T) {
	const head = `upstreams:
  up: {targets: ["http://127.0.0.1:1"]}
routes:
  - name: r
    upstream: up
    policies:
`
	tests := []struct {
		name, policies, field string
	}{
		{"rate-limit horizon", "      rate_limit: {limit: 1, burst: 10, period: 200000h}\n", "routes[0].policies.rate_limit.period"},
		{"breaker time window of 1ns", "      circuit_breaker: {window: {kind: time, size: 1ns}}\n", "routes[0].policies.circuit_breaker.window.size"},
		{"breaker count window over 2^30", "      circuit_breaker: {window: {size: 2000000000}}\n", "routes[0].policies.circuit_breaker.window.size"},
		{"timeout of 1ns", "      timeout: 1ns\n", "routes[0].policies.timeout"},
		{"period 0s", "      rate_limit: {limit: 1, period: 0s}\n", "routes[0].policies.rate_limit.period"},
		{"rate-limit key header with a space", "      rate_limit: {limit: 1, key: \"header:X Key\"}\n", "routes[0].policies.rate_limit.key"},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
			if err := os.WriteFile(path, []byte(head+tt.policies), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := run([]string{"validate", path}, &out, &errOut); code != 1 {
				t.Fatalf("validate: exit %d, want 1; stdout %q", code, out.String())
			}
			re := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:7:\d+: ` + regexp.QuoteMeta(tt.field) + `: `)
			if !re.MatchString(errOut.String()) {
				t.Errorf("stderr %q, want %s:7:COL: %s: ...", errOut.String(), path, tt.field)
			}
		})
	}
}

// TestValidateAgreesWithServe is a property test over random numeric values
// of every policy, upstream and server field (some absent, some zero, some
// huge): whenever a file validates, gateway.Check and gateway.New (what
// serve builds) both succeed. And for the same values set on a Config in
// code, past config's validation, Check succeeds exactly when New does.
func TestValidateAgreesWithServe(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Each kind of value: the sane ones (bounds included) first, then
	// zeros, negatives and out-of-bounds ones, picked one time in twenty so
	// that a good share of the files validate.
	type values struct{ sane, wild []string }
	ints := values{[]string{"1", "2", "3", "10", "20", "100", "1000", "100000"}, []string{"-1", "0", "100001", "2000000000"}}
	small := values{[]string{"1", "2", "10"}, ints.wild}
	large := values{[]string{"10", "100", "1000", "100000"}, ints.wild}
	headerBytes := values{[]string{"1024", "32768", "1048576"}, []string{"0", "1023", "1048577"}}
	attempts := values{[]string{"1", "2", "3", "100"}, []string{"0", "101", "2000000000"}}
	short := values{[]string{"1ms", "50ms"}, []string{"0s", "1ns", "25h"}}
	long := values{[]string{"1s", "1m", "24h"}, []string{"0s", "1ns", "25h", "200000h"}}
	durs := values{[]string{"1ms", "50ms", "1s", "1m", "24h"}, []string{"0s", "1ns", "999us", "25h", "200000h"}}
	fracs := values{[]string{"0.01", "0.5", "1"}, []string{"-0.1", "0", "1.5"}}
	pick := func(v values) string {
		if len(v.wild) > 0 && rng.IntN(20) == 0 {
			return v.wild[rng.IntN(len(v.wild))]
		}
		return v.sane[rng.IntN(len(v.sane))]
	}
	field := func(name string, v values) string {
		if rng.IntN(4) == 0 {
			return "" // absent: the default
		}
		return name + ": " + pick(v) + ", "
	}
	log := slog.New(slog.DiscardHandler)
	const rounds = 400
	valid := 0
	for i := range rounds {
		var b strings.Builder
		fmt.Fprintf(&b, "admin: {listen: \"off\"}\nserver: {%s%s%s%s%s}\n",
			field("read_header_timeout", durs), field("read_timeout", durs), field("idle_timeout", durs),
			field("shutdown_timeout", durs), field("max_header_bytes", headerBytes))
		fmt.Fprintf(&b, "upstreams:\n  up: {targets: [\"http://127.0.0.1:1\"], %s}\n", field("idle_timeout", durs))
		fmt.Fprintf(&b, "routes:\n  - name: r\n    upstream: up\n    policies:\n")
		fmt.Fprintf(&b, "      rate_limit: {algorithm: %s, limit: %s, %s%s}\n", pick(values{sane: config.RateLimitAlgorithms}),
			pick(ints), field("period", durs), field("burst", ints))
		kind, sizes := "count", large
		if rng.IntN(2) == 0 {
			kind, sizes = "time", durs
		}
		fmt.Fprintf(&b, "      circuit_breaker: {%s%s%s%s%s%swindow: {kind: %s, %s}}\n",
			field("failure_rate", fracs), field("consecutive_failures", ints), field("min_calls", small),
			field("open_for", durs), field("half_open_calls", ints), field("slow_call", values{sane: []string{"{threshold: " + pick(durs) + ", rate: " + pick(fracs) + "}"}}),
			kind, field("size", sizes))
		fmt.Fprintf(&b, "      retry: {%s%s%sbackoff: {%s%s}}\n",
			field("attempts", attempts), field("budget", fracs), field("on", values{[]string{"[connect_error]", "[timeout, 503]"}, []string{"[]"}}),
			field("initial", short), field("max", long))
		if rng.IntN(2) == 0 {
			fmt.Fprintf(&b, "      concurrency: {max: %s, %s%s}\n", pick(ints), field("queue", ints), field("max_wait", durs))
		} else {
			fmt.Fprintf(&b, "      concurrency: {adaptive: {algorithm: %s, %s%s%s}}\n", pick(values{sane: config.AdaptiveAlgorithms}),
				field("min", values{[]string{"1", "2"}, ints.wild}), field("max", large), field("initial", values{[]string{"2", "10"}, ints.wild}))
		}
		fmt.Fprintf(&b, "      %s\n", strings.TrimSuffix(field("timeout", durs), ", "))
		text := b.String()

		cfg, err := config.Parse("p.yaml", []byte(text))
		if err != nil {
			continue // validate refuses: serve never builds it
		}
		valid++
		if err := gateway.Check(cfg); err != nil {
			t.Fatalf("round %d: the file validates but Check fails: %v\n%s", i, err, text)
		}
		g, err := gateway.New(cfg, gateway.Options{Logger: log})
		if err != nil {
			t.Fatalf("round %d: the file validates but gateway.New fails: %v\n%s", i, err, text)
		}
		shutdown(t, g)
	}
	t.Logf("%d of %d random files validated", valid, rounds)
	if valid < rounds/10 {
		t.Errorf("only %d of %d random files validated: the property was hardly exercised", valid, rounds)
	}

	// Past config's validation: Check agrees with New on values set in code.
	base, err := config.Parse("b.yaml", []byte(`admin: {listen: "off"}
upstreams: {up: {targets: ["http://127.0.0.1:1"]}}
routes:
  - name: r
    upstream: up
    policies:
      rate_limit: {limit: 10}
      circuit_breaker: {}
      retry: {}
      concurrency: {adaptive: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	dur := func() config.Duration {
		all := append(append([]string(nil), durs.sane...), durs.wild...)
		d, _ := time.ParseDuration(all[rng.IntN(len(all))])
		return config.Duration(d)
	}
	num := func() int { // at most 2^20: a count window allocates its slots
		return []int{-1, 0, 1, 2, 10, 1000, 1 << 20}[rng.IntN(7)]
	}
	for i := range rounds {
		c := *base
		r := *base.Routes[0]
		c.Routes = []*config.Route{&r}
		rl, cb, rt, ad := *r.Policies.RateLimit, *r.Policies.CircuitBreaker, *r.Policies.Retry, *r.Policies.Concurrency.Adaptive
		rl.Limit, rl.Burst, rl.Period = num(), num(), dur()
		cb.MinCalls, cb.HalfOpenCalls, cb.OpenFor = num(), num(), dur()
		if rng.IntN(2) == 0 {
			cb.Window = config.Window{Kind: "time", Size: dur().D().String()}
		} else {
			cb.Window = config.Window{Kind: "count", Size: fmt.Sprint(num())}
		}
		rt.Attempts, rt.Backoff.Initial, rt.Backoff.Max = num(), dur(), dur()
		ad.Min, ad.Max, ad.Initial = num(), num(), num()
		conc := config.Concurrency{Adaptive: &ad}
		r.Policies.RateLimit, r.Policies.CircuitBreaker, r.Policies.Retry, r.Policies.Concurrency = &rl, &cb, &rt, &conc
		r.Policies.Timeout = dur()
		checkErr := gateway.Check(&c)
		g, newErr := gateway.New(&c, gateway.Options{Logger: log})
		if (checkErr == nil) != (newErr == nil) {
			t.Fatalf("round %d: Check: %v; New: %v", i, checkErr, newErr)
		}
		if g != nil {
			shutdown(t, g)
		}
	}
}

func shutdown(t *testing.T, g *gateway.Gateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
