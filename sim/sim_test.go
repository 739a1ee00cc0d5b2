package sim

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency/limit"
)

// short returns a scenario of the default downstream at load for d.
func short(name string, load float64, d time.Duration) Scenario {
	return Scenario{Name: name, Seed: 7, Duration: d, Warmup: time.Second, Settle: time.Second,
		Arrivals: Arrivals{Load: load}}
}

func run(t *testing.T, sc Scenario, alg Algorithm) *Result {
	t.Helper()
	r, err := Run(sc, "test", alg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > tol {
		t.Errorf("%s = %v, want %v ± %v", what, got, want, tol)
	}
}

func TestDeterminism(t *testing.T) {
	// Every feature at once: bursts, costs, classes, retries, a queue,
	// steps of all kinds.
	sc := Scenario{Name: "all", Seed: 42, Duration: 20 * time.Second, Warmup: time.Second,
		Service:  Dist{Kind: Lognormal, Mean: 15 * time.Millisecond, Sigma: 0.8},
		Arrivals: Arrivals{Kind: Bursty, Load: 2},
		Costs:    []CostClass{{Weight: 3, Factor: 1}, {Weight: 1, Factor: 3}},
		Classes:  []Class{{Weight: 1, Share: 0.5}, {Weight: 2, Share: 0.3}},
		Retry:    Retry{MaxRetries: 2},
		Queue:    ClientQueue{Max: 20, MaxWait: 30 * time.Millisecond},
		Steps: []Step{{At: 8 * time.Second, Workers: 8}, {At: 12 * time.Second, AddNetDelay: 40 * time.Millisecond},
			{At: 16 * time.Second, Load: 0.5}},
	}
	for _, f := range All() {
		a, err := RunFactory(sc, f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := RunFactory(sc, f)
		if err != nil {
			t.Fatal(err)
		}
		if !same(t, a, b) {
			t.Errorf("%s: two runs with the same seed differ", f.Name)
		}
	}
	// A different seed gives different arrivals.
	a, _ := RunFactory(sc, All()[1])
	sc.Seed++
	b, _ := RunFactory(sc, All()[1])
	if same(t, a, b) {
		t.Error("a different seed gave identical figures")
	}
}

// same reports whether two results are identical (NaN figures included,
// which reflect.DeepEqual would call different).
func same(t *testing.T, a, b *Result) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb) && reflect.DeepEqual(a.Series, b.Series)
}

func TestRunAllMatchesRun(t *testing.T) {
	scs := []Scenario{short("a", 3, 5*time.Second), short("b", 0.5, 5*time.Second)}
	fs := Baselines()
	all, err := RunAll(scs, fs)
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range scs {
		for j, f := range fs {
			one, err := RunFactory(sc, f)
			if err != nil {
				t.Fatal(err)
			}
			if !same(t, one, all[i*len(fs)+j]) {
				t.Errorf("%s/%s: RunAll differs from RunFactory", sc.Name, f.Name)
			}
		}
	}
}

func TestQueueModel(t *testing.T) {
	expMedian := math.Ln2 * 20 // ms, median of an exponential of mean 20 ms
	tests := []struct {
		name                string
		sc                  Scenario
		alg                 Algorithm
		goodput, tolGoodput float64
		p50, tolP50         float64
	}{
		{"no limit at 0.5x: goodput is the offered load, latency the service time",
			short("half", 0.5, 60*time.Second), fixed(Unlimited), 0.5, 0.02, expMedian, 1},
		{"no limit at 0.5x with 60 ms of network delay",
			func() Scenario {
				s := short("delay", 0.5, 60*time.Second)
				s.NetDelay = 60 * time.Millisecond
				return s
			}(),
			fixed(Unlimited), 0.5, 0.02, expMedian + 60, 1},
		{"no limit at 3x: the queue grows past the deadline, goodput collapses",
			short("3x", 3, 30*time.Second), fixed(Unlimited), 0, 0.02, 200, 1},
		{"no limit at 3x when the downstream skips expired requests: FIFO still serves the oldest, too late",
			func() Scenario { s := short("skip", 3, 30*time.Second); s.SkipExpired = true; return s }(),
			fixed(Unlimited), 0.03, 0.03, 200, 1},
		{"constant service, limit = workers at 10x: workers always busy",
			func() Scenario {
				s := short("const", 10, 30*time.Second)
				s.Service = Dist{Kind: Constant, Mean: 20 * time.Millisecond}
				return s
			}(), fixed(16), 0.99, 0.01, 20, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.sc, tt.alg)
			near(t, "goodput", float64(r.Goodput), tt.goodput, tt.tolGoodput)
			near(t, "p50", float64(r.P50), tt.p50, tt.tolP50)
		})
	}
}

// erlangB is the blocking probability of c servers offered a erlangs.
func erlangB(c int, a float64) float64 {
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return b
}

func TestLossSystemMatchesErlangB(t *testing.T) {
	// A static limit equal to the workers, with no network delay, makes an
	// M/M/c/c loss system: the rejected fraction is Erlang B.
	for _, load := range []float64{0.8, 1.5, 3} {
		r := run(t, short("erlang", load, 600*time.Second), fixed(16))
		near(t, "rejected", float64(r.Rejected), erlangB(16, 16*load), 0.004)
		if r.TimedOut > 1e-3 { // only services longer than the deadline
			t.Errorf("load %v: %v timed out, want almost none", load, r.TimedOut)
		}
	}
}

func TestFeatures(t *testing.T) {
	t.Run("retries multiply attempts, not goodput", func(t *testing.T) {
		sc := short("retry", 3, 20*time.Second)
		plain := run(t, sc, fixed(16))
		sc.Retry = Retry{MaxRetries: 3}
		retry := run(t, sc, fixed(16))
		if retry.Rejected <= plain.Rejected {
			t.Errorf("rejected attempts %v with retries, %v without: want more", retry.Rejected, plain.Rejected)
		}
		near(t, "goodput with retries", float64(retry.Goodput), float64(plain.Goodput), 0.05)
	})
	t.Run("priority classes shed the less important class", func(t *testing.T) {
		sc := short("prio", 3, 20*time.Second)
		sc.Classes = []Class{{Weight: 1, Share: 0.8}, {Weight: 3, Share: 0.2}}
		r := run(t, sc, fixed(16))
		if len(r.ClassServed) != 2 || r.ClassServed[0] < 3*r.ClassServed[1] {
			t.Errorf("class served %v: want class 0 served far more", r.ClassServed)
		}
	})
	t.Run("a client queue trades rejections for waiting", func(t *testing.T) {
		sc := short("queue", 1.2, 20*time.Second)
		plain := run(t, sc, fixed(16))
		sc.Queue = ClientQueue{Max: 50, MaxWait: 50 * time.Millisecond}
		queued := run(t, sc, fixed(16))
		if !(queued.Rejected < 0.8*plain.Rejected && queued.P50 > plain.P50) {
			t.Errorf("queue: rejected %v (was %v), p50 %v (was %v)", queued.Rejected, plain.Rejected, queued.P50, plain.P50)
		}
	})
	t.Run("mixed cost keeps the mean work", func(t *testing.T) {
		sc := short("cost", 0.5, 30*time.Second)
		sc.Service.Mean = 10 * time.Millisecond
		sc.Costs = []CostClass{{Weight: 1, Factor: 1}, {Weight: 1, Factor: 3}}
		r := run(t, sc, fixed(Unlimited))
		near(t, "goodput", float64(r.Goodput), 0.5, 0.03)
		if sc.MeanWork() != 20*time.Millisecond {
			t.Errorf("MeanWork = %v, want 20ms", sc.MeanWork())
		}
	})
	t.Run("bursty arrivals keep their mean", func(t *testing.T) {
		sc := short("bursty", 0.6, 60*time.Second)
		sc.Arrivals.Kind = Bursty
		r := run(t, sc, fixed(Unlimited))
		near(t, "offered", float64(r.Offered), 0.6, 0.03)
	})
	t.Run("samples: only attempts that ran, dropped on timeout", func(t *testing.T) {
		rec := &recorder{lim: 1000}
		r := run(t, short("samples", 3, 5*time.Second), rec)
		if rec.drops == 0 || rec.ok == 0 {
			t.Fatalf("samples: %d ok, %d dropped; want both", rec.ok, rec.drops)
		}
		if rec.badRTT {
			t.Error("a dropped sample's rtt exceeded the deadline, or an ok one was zero")
		}
		_ = r
	})
}

// recorder is a static limit that checks its samples.
type recorder struct {
	lim       int
	ok, drops int
	badRTT    bool
}

func (r *recorder) Limit() int { return r.lim }
func (r *recorder) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	if dropped {
		r.drops++
		r.badRTT = r.badRTT || rtt > DefaultDeadline+time.Microsecond
	} else {
		r.ok++
		r.badRTT = r.badRTT || rtt <= 0 || now < Epoch || inflight < 1 || inflight > r.lim
	}
	return r.lim
}

// scripted is a limit that follows a function of the simulated time of its
// last sample.
type scripted struct {
	f   func(sec float64) int
	cur int
}

func (s *scripted) Limit() int { return s.cur }
func (s *scripted) Sample(now int64, _ time.Duration, _ int, _ bool) int {
	s.cur = s.f(float64(now-Epoch) / 1e9)
	return s.cur
}

func TestOptimumAndConvergence(t *testing.T) {
	sc := Scenario{}
	sc, _ = sc.Normalize()
	if got := sc.Optimum(16, 0); got != 16 {
		t.Errorf("Optimum(16, 0) = %v, want 16", got)
	}
	if got := sc.Optimum(16, 60*time.Millisecond); got != 64 {
		t.Errorf("Optimum(16, 60ms) = %v, want 64", got)
	}
	half := Scenario{Name: "half", Seed: 1, Duration: 60 * time.Second, Arrivals: Arrivals{Load: 3},
		Steps: []Step{{At: 30 * time.Second, Workers: 8}}}
	tests := []struct {
		name             string
		f                func(float64) int
		conv, convStrict float64 // seconds after the step; +Inf never
	}{
		{"jumps at once", func(s float64) int {
			if s < 30 {
				return 16
			}
			return 8
		}, 0, 0},
		{"lags 1.5 s, then a 200 ms excursion at 40 s", func(s float64) int {
			switch {
			case s < 31.5:
				return 16
			case s >= 40 && s < 40.2:
				return 14
			}
			return 8
		}, 1.5, 10.2},
		{"settles 1 above the optimum: within ±1", func(s float64) int {
			if s < 32 {
				return 16
			}
			return 9
		}, 2, 2},
		{"leaves the band at the end", func(s float64) int {
			if s < 55 {
				return 8
			}
			return 12
		}, math.Inf(1), math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, half, &scripted{f: tt.f, cur: 16})
			seg := r.Segments[1]
			if seg.Optimum != 8 || r.Optimum != 8 {
				t.Fatalf("optimum %v after the step, want 8", seg.Optimum)
			}
			check := func(what string, got Num, want float64) {
				if math.IsInf(want, 1) {
					if !math.IsInf(float64(got), 1) {
						t.Errorf("%s = %v, want never", what, got)
					}
					return
				}
				near(t, what, float64(got), want, 0.03)
			}
			check("Conv", seg.Conv, tt.conv)
			check("ConvStrict", seg.ConvStrict, tt.convStrict)
			if len(r.Conv) != 1 || r.Conv[0] != seg.Conv {
				t.Errorf("Result.Conv = %v, want [%v]", r.Conv, seg.Conv)
			}
		})
	}
	t.Run("below capacity a high limit is in band", func(t *testing.T) {
		sc := short("low", 0.5, 20*time.Second)
		r := run(t, sc, fixed(100))
		if r.Segments[0].InBand != 1 || r.Segments[0].Conv != 0 {
			t.Errorf("InBand %v, Conv %v: want 1 and 0", r.Segments[0].InBand, r.Segments[0].Conv)
		}
	})
	t.Run("CV and drift", func(t *testing.T) {
		// Alternates 15 and 17 every 100 ms: mean 16, CV 1/16, no drift.
		sc := short("cv", 3, 30*time.Second)
		r := run(t, sc, &scripted{f: func(s float64) int { return 15 + 2*(int(s*10)%2) }, cur: 16})
		near(t, "CV", float64(r.CV), 1.0/16, 0.005)
		near(t, "drift", float64(r.Drift), 0, 0.01)
		near(t, "mean", float64(r.MeanLimit), 16, 0.1)
		// A ramp from 16 to 26 over the run: the last tenth of the steady
		// part minus its second tenth is 0.8 × the ramp over the steady part.
		ramp := run(t, sc, &scripted{f: func(s float64) int { return 16 + int(s/3) }, cur: 16})
		steady := 30.0 - 1 // Settle 1 s
		near(t, "ramp drift", float64(ramp.Drift), 0.8*steady/3/16, 0.03)
	})
}

func TestSVG(t *testing.T) {
	sc := Standard()[3] // capacity-half
	sc.Duration, sc.Steps = 20*time.Second, []Step{{At: 10 * time.Second, Workers: 8}}
	res, err := RunAll([]Scenario{sc}, All())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSVG(&buf, sc, res); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	var root string
	lines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("invalid SVG: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
				if se.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", se.Name.Space)
				}
			}
			if se.Name.Local == "polyline" {
				lines++
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	if want := len(res); lines != want { // every algorithm but "none", plus the optimum
		t.Errorf("%d polylines, want %d", lines, want)
	}
}

func TestScenarioFile(t *testing.T) {
	for _, sc := range Standard() {
		n, err := sc.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(toFile(n))
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseScenario(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v\n%s", sc.Name, err, b)
		}
		if !reflect.DeepEqual(back, n) {
			t.Errorf("%s: round trip changed the scenario:\n%+v\n%+v", sc.Name, back, n)
		}
	}
	good := `{"name": "x", "arrivals": {"load": 2}, "service": {"kind": "bimodal", "mean": "10ms"},
		"steps": [{"at": "5s", "workers": 4}, {"at": "2s", "add_net_delay": "50ms"}], "duration": "10s"}`
	sc, err := ParseScenario(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Service.SlowFactor != 10 || sc.Steps[0].AddNetDelay != 50*time.Millisecond || sc.Duration != 10*time.Second {
		t.Errorf("parsed %+v", sc)
	}
	for _, bad := range []string{
		`{"name": "x", "workerz": 3}`,
		`{"duration": 10}`,
		`{"service": {"kind": "weibull"}}`,
		`{"steps": [{"at": "90s", "workers": 2}]}`,
		`{"classes": [{"weight": 1, "share": 0.7}, {"weight": 1, "share": 0.7}]}`,
		`{"arrivals": {"kind": "bursty", "burst_factor": 5}}`,
	} {
		if _, err := ParseScenario(strings.NewReader(bad)); !errors.Is(err, ErrInvalidScenario) {
			t.Errorf("%s: error %v, want ErrInvalidScenario", bad, err)
		}
	}
}

func TestStandardAndLookup(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range Standard() {
		if _, err := sc.Normalize(); err != nil {
			t.Error(err)
		}
		if seen[sc.Name] {
			t.Errorf("duplicate scenario %s", sc.Name)
		}
		seen[sc.Name] = true
		if _, err := Lookup(sc.Name); err != nil {
			t.Error(err)
		}
	}
	if len(seen) != 14 {
		t.Errorf("%d standard scenarios, want 14", len(seen))
	}
	if _, err := Lookup("nope"); !errors.Is(err, ErrInvalidScenario) {
		t.Errorf("Lookup(nope) = %v", err)
	}
}

func TestWriters(t *testing.T) {
	scs := []Scenario{short("overload-3x", 3, 5*time.Second)}
	res, err := RunAll(scs, All())
	if err != nil {
		t.Fatal(err)
	}
	var tab, goals, js bytes.Buffer
	if err := WriteTable(&tab, scs, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteGoals(&goals, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, scs, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range All() {
		if !strings.Contains(tab.String(), "\n"+f.Name+" ") || !strings.Contains(goals.String(), "\n"+f.Name+" ") {
			t.Errorf("%s missing from the table or the goals", f.Name)
		}
	}
	var rep struct {
		Scenarios []ScenarioFile
		Results   []map[string]any
	}
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	if len(rep.Results) != len(All()) || rep.Results[0]["mean_limit"] != nil {
		t.Errorf("JSON: %d results, first mean_limit %v (want null for no limit)", len(rep.Results), rep.Results[0]["mean_limit"])
	}
}

// The limit package's algorithms satisfy Algorithm.
var _ Algorithm = limit.Algorithm(nil)

// BenchmarkRun measures the simulator itself: one 30-second run at 3×
// overload (about 72,000 requests) with the oracle limit.
func BenchmarkRun(b *testing.B) {
	sc := short("bench", 3, 30*time.Second)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(sc, "oracle", fixed(16)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDefaultGoalsOverSeeds pins the goals of issue #4 (see Goals) that
// sluice's Default meets on every seed from 1 to 7 (and on 30 seeds of
// 1–32: the CV misses by under a point on seeds 16 and 25; more seeds
// would take the package test under -race past a minute): at 3×
// overload goodput stays at least 95% with p99 at most 2× the no-load
// p99; after capacity
// halves at a 1 ms service time the limit converges within 2 s; the
// limit's CV stays under 10% at 1.5×, 3× and 10×; it drifts less than 5%
// over 30 minutes at 1.2×; at least 98% of requests are served after the
// path's latency grows at 0.8× load; and at most 1% of bursty 80% load is
// rejected. Capacity-half at 20 ms service misses its 2 s on three seeds
// of four: what is pinned, on seeds 1 to 4, is that it converges within
// 20 s (about 60 rounds of 0.32 s; the 2 s goal at 1 ms allows about 125
// rounds). With 8 workers its ±10% band ends one call above the limit
// Default keeps at 3× (the knee and a queue of one call), so whether the
// limit stays in the band is a matter of noise: 22 seeds of 32 converge
// within 20 s, a few never.
func TestDefaultGoalsOverSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 56 simulations")
	}
	var def Factory
	for _, f := range Sluice() {
		if f.Name == "default" {
			def = f
		}
	}
	pinned := map[string]bool{
		"3x: goodput≥95% p99≤2×": true,
		"half@1ms: conv≤2s":      true,
		"cv<10%":                 true,
		"drift<5%":               true,
		"latency: served≥98%":    true,
		"bursty: rej≤1%":         true,
	}
	names := []string{"overload-1.5x", "overload-3x", "overload-10x", "capacity-half-1ms", "drift-1.2x", "latency-step",
		"bursty-0.8x", "capacity-half"}
	for seed := uint64(1); seed <= 7; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			var scs []Scenario
			for _, name := range names {
				sc, err := Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				sc.Seed = seed
				if name == "capacity-half-1ms" {
					// 10 s after the step are enough to see it settle.
					// (The others' figures depend on the run's length:
					// they stay as in the goals.)
					sc.Duration = sc.Steps[0].At + 10*time.Second
				}
				scs = append(scs, sc)
			}
			results, err := RunAll(scs, []Factory{def})
			if err != nil {
				t.Fatal(err)
			}
			met := 0
			for _, g := range Goals() {
				if !pinned[g.Name] {
					continue
				}
				vals, ok, found := g.Measure(results, def.Name)
				switch {
				case !found:
					t.Errorf("%s: scenario %s not run", g.Name, g.Scenario)
				case !ok:
					t.Errorf("%s: not met, figures %v", g.Name, vals)
				}
				met++
			}
			if met != len(pinned) {
				t.Errorf("found %d of the %d pinned goals in Goals()", met, len(pinned))
			}
			for _, r := range results {
				if seed <= 4 && r.Scenario == "capacity-half" && (len(r.Conv) == 0 || !(r.Conv[0] <= 20)) {
					t.Errorf("capacity-half: converged in %v s, want ≤ 20 s", r.Conv)
				}
			}
		})
	}
}
