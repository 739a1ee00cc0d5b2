package config_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

// two is route with a second upstream, b, for fallbacks; the route's
// policies go on line 6.
const two = `upstreams:
  a: {targets: ["http://127.0.0.1:1"]}
  b: {targets: ["http://127.0.0.1:2"]}
routes:
  - name: r
    upstream: a
`

const adaptive = "concurrency: {adaptive: {}}, "

// TestFlowRefused checks that every unusable value of hedge, priority and
// the fallback's levels is an error at its line and column that names the
// field.
func TestFlowRefused(t *testing.T) {
	tests := []struct {
		name, src string
		key       string // the YAML key whose value is at fault (its last one in src)
		want      string // the error after file:line:col
	}{
		{"hedge delay 0s", route + "    policies: {hedge: {delay: 0s}}\n", `delay`, `routes[0].policies.hedge.delay: want a duration between 1ms and 24h, got 0s`},
		{"hedge quantile 1", route + "    policies: {hedge: {quantile: 1}}\n", `quantile`, `routes[0].policies.hedge.quantile: want a fraction in [0, 1) (0.95 for the 95th percentile), got 1`},
		{"hedge quantile negative", route + "    policies: {hedge: {quantile: -0.5}}\n", `quantile`, `routes[0].policies.hedge.quantile: want a fraction in [0, 1)`},
		{"hedge max delay below delay", route + "    policies: {hedge: {delay: 50ms, max_delay: 10ms}}\n", `max_delay`, `routes[0].policies.hedge.max_delay: max_delay (10ms) is below delay (50ms)`},
		{"hedge window 0", route + "    policies: {hedge: {window: 0}}\n", `window`, `routes[0].policies.hedge.window: want between 1 and 10000 latencies, got 0`},
		{"hedge window huge", route + "    policies: {hedge: {window: 1000000}}\n", `window`, `routes[0].policies.hedge.window: want between 1 and 10000 latencies, got 1000000`},
		{"hedge budget 0", route + "    policies: {hedge: {budget: 0}}\n", `budget`, `routes[0].policies.hedge.budget: want a fraction in (0, 1], got 0`},
		{"hedge budget 2", route + "    policies: {hedge: {budget: 2}}\n", `budget`, `routes[0].policies.hedge.budget: want a fraction in (0, 1], got 2`},

		{"priority without adaptive", route + "    policies: {priority: {default: critical}}\n", `priority`, `routes[0].policies.priority: priority classes share an adaptive limit: give concurrency.adaptive too`},
		{"priority without adaptive, static limit", route + "    policies: {concurrency: {max: 5}, priority: {}}\n", `priority`, `routes[0].policies.priority: priority classes share an adaptive limit`},
		{"priority from", route + "    policies: {" + adaptive + "priority: {from: ip}}\n", `from`, `routes[0].policies.priority.from: want "route" or "header:NAME", got "ip"`},
		{"priority header name", route + "    policies: {" + adaptive + "priority: {from: \"header:X Prio\"}}\n", `from`, `routes[0].policies.priority.from: "X Prio" is not a header name`},
		{"priority default", route + "    policies: {" + adaptive + "priority: {default: urgent}}\n", `default`, `routes[0].policies.priority.default: "urgent" is not one of critical, normal, best_effort`},
		{"priority values without header", route + "    policies: {" + adaptive + "priority: {values: {gold: critical}}}\n", `values`, `routes[0].policies.priority.values: values map a header's values: give from: "header:NAME"`},
		{"priority value class", route + "    policies: {" + adaptive + "priority: {from: \"header:X-Tier\", values: {gold: high}}}\n", `gold`, `routes[0].policies.priority.values.gold: "high" is not one of critical, normal, best_effort`},
		{"priority value with CR LF", route + "    policies: {" + adaptive + "priority: {from: \"header:X-Tier\", values: {\"a\\r\\nb\": critical}}}\n", `"a\r\nb"`, `routes[0].policies.priority.values.a` + "\r\n" + `b: a header value is not empty`},
		{"priority share above 1", route + "    policies: {" + adaptive + "priority: {shares: {critical: 1.5}}}\n", `critical`, `routes[0].policies.priority.shares.critical: want a fraction in [0, 1], got 1.5`},
		{"priority share negative", route + "    policies: {" + adaptive + "priority: {shares: {best_effort: -0.1}}}\n", `best_effort`, `routes[0].policies.priority.shares.best_effort: want a fraction in [0, 1], got -0.1`},
		{"priority shares sum", route + "    policies: {" + adaptive + "priority: {shares: {critical: 0.8, normal: 0.3}}}\n", `shares`, `routes[0].policies.priority.shares: the shares sum to 1.1`},

		{"fallback upstream unknown", two + "    policies: {fallback: {upstream: c}}\n", `upstream`, `routes[0].policies.fallback.upstream: no upstream named "c"`},
		{"fallback upstream own", two + "    policies: {fallback: {upstream: a}}\n", `upstream`, `routes[0].policies.fallback.upstream: "a" is the route's own upstream: a fallback needs another`},
		{"fallback levels with coalesce", two + "    policies: {coalesce: true, fallback: {last_good: {}}}\n", `fallback`, `routes[0].policies.fallback: coalesced requests fall back to the static answer only`},
		{"last good max age 0s", two + "    policies: {fallback: {last_good: {max_age: 0s}}}\n", `max_age`, `routes[0].policies.fallback.last_good.max_age: want a duration between 1ms and 24h, got 0s`},
		{"last good max age 25h", two + "    policies: {fallback: {last_good: {max_age: 25h}}}\n", `max_age`, `routes[0].policies.fallback.last_good.max_age: want a duration between 1ms and 24h, got 25h`},
		{"last good entries 0", two + "    policies: {fallback: {last_good: {max_entries: 0}}}\n", `max_entries`, `routes[0].policies.fallback.last_good.max_entries: want between 1 and 1048576 answers, got 0`},
		{"last good bytes small", two + "    policies: {fallback: {last_good: {max_bytes: 100}}}\n", `max_bytes`, `routes[0].policies.fallback.last_good.max_bytes: want between 1024 and 1073741824 bytes, got 100`},
		{"grpc status unknown", two + "    policies: {fallback: {grpc_status: NOPE}}\n", `grpc_status`, `routes[0].policies.fallback.grpc_status: want a gRPC status code's name (OK, UNAVAILABLE, NOT_FOUND, ...) or number (0 to 16), got "NOPE"`},
		{"grpc status 17", two + "    policies: {fallback: {grpc_status: 17}}\n", `grpc_status`, `routes[0].policies.fallback.grpc_status: want a gRPC status code's name`},
		{"last good bytes huge", two + "    policies: {fallback: {last_good: {max_bytes: 2000000000}}}\n", `max_bytes`, `routes[0].policies.fallback.last_good.max_bytes: want between 1024 and 1073741824 bytes, got 2000000000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("c.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.src)
			}
			want := valuePos(t, tt.src, tt.key) + tt.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error\n%v\nwant it to begin with\n%s", err, want)
			}
		})
	}
}

// TestFlowDefaults checks the defaults of hedge, priority and the
// fallback's levels, and when the static answer is a level.
func TestFlowDefaults(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(two+`    policies:
      concurrency: {adaptive: {}}
      hedge: {}
      priority: {from: "header:X-Priority"}
      fallback: {upstream: b, last_good: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Routes[0].Policies
	wantHedge := config.Hedge{Delay: config.Duration(100 * time.Millisecond), Window: 64, Budget: 0.1}
	if *p.Hedge != wantHedge {
		t.Errorf("hedge = %+v, want %+v", *p.Hedge, wantHedge)
	}
	wantPrio := config.Priority{From: config.Source{Kind: config.SourceHeader, Header: "X-Priority"}, Default: "normal",
		Values: map[string]string{"critical": "critical", "normal": "normal", "best_effort": "best_effort"},
		Shares: config.Shares{Critical: 0.5, Normal: 0.3}}
	if !reflect.DeepEqual(*p.Priority, wantPrio) {
		t.Errorf("priority = %+v, want %+v", *p.Priority, wantPrio)
	}
	wantLG := config.LastGood{MaxAge: config.Duration(time.Minute), MaxEntries: 1024, MaxBytes: 16 << 20}
	if *p.Fallback.LastGood != wantLG {
		t.Errorf("last_good = %+v, want %+v", *p.Fallback.LastGood, wantLG)
	}
	if p.Fallback.Static || p.Fallback.GRPCStatic {
		t.Errorf("a fallback with upstream and last_good and no static field has a static level")
	}
	if f := p.Fallback; f.GRPCStatus != "UNAVAILABLE" || f.GRPCCode != 14 || f.GRPCMessage != "" {
		t.Errorf("grpc_status %q (%d), grpc_message %q; want UNAVAILABLE (14) and none", f.GRPCStatus, f.GRPCCode, f.GRPCMessage)
	}

	// A static level of gRPC's alone is not HTTP's (it was).
	for _, tt := range []struct {
		policies         string
		static, grpcOnly bool
	}{
		{"fallback: {}", true, false},
		{"fallback: {upstream: b}", false, false},
		{"fallback: {last_good: {}}", false, false},
		{"fallback: {upstream: b, status: 503}", true, false},
		{"fallback: {last_good: {}, body: degraded}", true, false},
		{"fallback: {upstream: b, content_type: application/json}", true, false},
		{"fallback: {upstream: b, grpc_status: OK}", false, true},
		{"fallback: {last_good: {}, grpc_message: degraded}", false, true},
		{"fallback: {upstream: b, status: 503, grpc_status: OK}", true, false},
	} {
		c, err := config.Parse("c.yaml", []byte(two+"    policies: {"+tt.policies+"}\n"))
		if err != nil {
			t.Fatalf("%s: %v", tt.policies, err)
		}
		f := c.Routes[0].Policies.Fallback
		if f.Static != tt.static || f.GRPCStatic != (tt.static || tt.grpcOnly) || f.Status != 503 || f.ContentType != "application/json" {
			t.Errorf("%s: static %v, grpc static %v, status %d, content type %q; want static %v, grpc static %v, 503, application/json",
				tt.policies, f.Static, f.GRPCStatic, f.Status, f.ContentType, tt.static, tt.static || tt.grpcOnly)
		}
	}
}

// TestFlowAccepted checks the values next to the refused ones.
func TestFlowAccepted(t *testing.T) {
	for _, src := range []string{
		route + "    policies: {hedge: {delay: 1ms, quantile: 0.99, max_delay: 1ms, window: 10000, budget: 1}}\n",
		route + "    policies: {hedge: {delay: 24h, quantile: 0, window: 1, budget: 0.001}}\n",
		route + "    policies: {" + adaptive + "priority: {from: route, default: best_effort, shares: {critical: 1, normal: 0, best_effort: 0}}}\n",
		route + "    policies: {" + adaptive + "priority: {from: \"header:X-Tier\", values: {gold: critical, \"free tier\": best_effort}}}\n",
		two + "    policies: {fallback: {upstream: b, last_good: {max_age: 1ms, max_entries: 1, max_bytes: 1024}}}\n",
		two + "    policies: {fallback: {last_good: {max_age: 24h, max_entries: 1048576, max_bytes: 1073741824}, status: 200, body: ok}}\n",
		two + "    policies: {fallback: {grpc_status: 16, grpc_message: \"try later\"}}\n",
		two + "    policies: {fallback: {grpc_status: DATA_LOSS}}\n",
	} {
		if _, err := config.Parse("c.yaml", []byte(src)); err != nil {
			t.Errorf("refused:\n%s\n%v", src, err)
		}
	}
}

// TestFlowCoalesceRefusedOnce checks that a fallback's levels beside
// coalesce are reported once. (They were reported twice.)
func TestFlowCoalesceRefusedOnce(t *testing.T) {
	_, err := config.Parse("c.yaml", []byte(two+"    policies: {coalesce: true, fallback: {upstream: b, last_good: {}}}\n"))
	if err == nil {
		t.Fatal("accepted")
	}
	if n := strings.Count(err.Error(), "coalesced requests fall back"); n != 1 {
		t.Errorf("reported %d times, want once:\n%v", n, err)
	}
}
