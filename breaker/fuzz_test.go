package breaker

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// fuzzHeld is a permit the fuzz driver holds, with what it knew when it got
// it.
type fuzzHeld struct {
	p     sluice.Permit
	state State
	gen   uint64
}

type fuzzRecord struct {
	at   int64
	code code
}

// fuzzModel is an independent model of what the breaker must do: the window
// contents, the consecutive failures, the probes in flight and the open
// durations.
type fuzzModel struct {
	t          *testing.T
	clk        *clock.Fake
	b          *Breaker
	o          Options
	held       []fuzzHeld
	probes     int
	records    []fuzzRecord // calls recorded since the breaker last closed
	consec     int
	closedGen  uint64 // generation the records belong to
	openedAt   int64
	openFor    int64
	tripsSince int // trips since the breaker last closed
}

// FuzzBreaker drives a breaker with random acquires, outcomes, clock steps
// and manual operations and checks it against fuzzModel: probes in flight
// never exceed HalfOpenCalls, an open breaker admits nothing before its open
// duration (grown as configured) ends, the window holds exactly the calls it
// should, and the breaker trips exactly when a condition is met.
func FuzzBreaker(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 5, 13, 5, 13, 5, 13, 5, 13, 4, 60, 0, 0, 10, 2, 5, 5, 5, 5})
	f.Add([]byte{1, 1, 2, 3, 13, 13, 13, 13, 13, 13, 20, 20, 20, 0, 8, 16, 2, 2, 2, 36, 36, 5, 5, 5})
	f.Add([]byte{2, 2, 1, 0, 21, 21, 21, 21, 21, 4, 4, 4, 4, 0, 0, 0, 0, 2, 10, 18, 26, 34, 6, 14, 22, 30, 38, 5})
	f.Add([]byte{3, 3, 3, 1, 13, 5, 13, 5, 13, 13, 13, 12, 0, 0, 0, 10, 18, 7, 44, 5, 6, 14, 5, 13, 13, 13, 13})
	f.Add([]byte{4, 0, 1, 2, 29, 29, 29, 29, 29, 29, 29, 29, 4, 4, 0, 2, 5, 22, 30, 38, 46, 54, 62, 13, 13, 13})
	f.Add([]byte{5, 1, 0, 1, 0, 0, 0, 0, 13, 13, 13, 13, 13, 2, 2, 2, 2, 60, 60, 0, 0, 0, 2, 2, 2, 5, 13, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		m := newFuzzModel(t, data[:4])
		for _, op := range data[4:] {
			m.step(op)
			m.check()
		}
		for len(m.held) > 0 {
			m.done(0, sluice.Success)
			m.check()
		}
		if got := m.b.Metrics().Probes; got != 0 {
			t.Fatalf("%d probes left after every permit was done", got)
		}
	})
}

func newFuzzModel(t *testing.T, cfg []byte) *fuzzModel {
	m := &fuzzModel{t: t, clk: clock.NewFake(time.Time{})}
	o := Options{
		Clock:            m.clk,
		MinCalls:         1 + int(cfg[0]>>4)%5,
		HalfOpenCalls:    1 + int(cfg[1])%3,
		SuccessThreshold: 1 + int(cfg[1]>>2)%3,
		OpenDuration:     time.Second,
		OpenMultiplier:   float64(1 + cfg[2]%3),
		MaxOpenDuration:  3 * time.Second,
	}
	if cfg[0]&1 == 0 {
		o.CountWindow = 5 + int(cfg[0]>>1)%4
	} else {
		o.TimeWindow, o.Buckets = 2*time.Second, 4
	}
	switch cfg[3] % 4 {
	case 0:
		o.FailureRate = 0.5
	case 1:
		o.ConsecutiveFailures = 1 + int(cfg[3]>>2)%3
	case 2:
		o.SlowCallRate, o.SlowCallThreshold = 0.5, 100*time.Millisecond
	case 3:
		o.FailureRate, o.ConsecutiveFailures, o.SlowCallThreshold = 0.6, 2, 100*time.Millisecond
	}
	o.OnStateChange = func(_ string, from, to State) {
		switch to {
		case Open:
			m.openedAt = m.clk.Nanotime()
			d := float64(time.Second) * math.Pow(o.OpenMultiplier, float64(m.tripsSince))
			m.openFor = int64(min(d, float64(o.MaxOpenDuration)))
			m.tripsSince++
		case Closed:
			m.tripsSince = 0
		}
	}
	b, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	m.b, m.o = b, o
	return m
}

var fuzzClasses = [...]sluice.Class{sluice.Success, sluice.Failure, sluice.Success, sluice.Ignored, sluice.Dropped}

func (m *fuzzModel) step(op byte) {
	arg := int(op >> 3)
	switch op & 7 {
	case 0, 1:
		if len(m.held) < 8 {
			m.acquire()
		}
	case 2, 3:
		if len(m.held) > 0 {
			m.done(arg%len(m.held), fuzzClasses[arg%len(fuzzClasses)])
		}
	case 4:
		m.clk.Advance(time.Duration(arg%8) * 250 * time.Millisecond)
	case 5:
		if m.acquire() {
			m.done(len(m.held)-1, fuzzClasses[arg%len(fuzzClasses)])
		}
	case 6:
		switch arg % 10 {
		case 0:
			m.b.Open()
		case 1:
			m.b.Close()
		case 2:
			m.b.Reset()
		case 3:
			m.b.ForceOpen()
		case 4:
			m.b.Disable()
		}
	case 7:
		m.b.State()
	}
}

// latencyOf makes every third call slow (for SlowCallThreshold), so that
// slow calls come and go with the window.
func (m *fuzzModel) latencyOf() time.Duration {
	if len(m.records)%3 == 1 {
		return time.Second
	}
	return 10 * time.Millisecond
}

func (m *fuzzModel) acquire() bool {
	t := m.t
	st := m.b.State() // moves Open to HalfOpen when due
	gen := m.b.Metrics().Generation
	now := m.clk.Nanotime()
	p, err := m.b.Acquire(context.Background())
	var r *sluice.Rejection
	if err != nil && (!errors.As(err, &r) || r.Reason != sluice.CircuitOpen) {
		t.Fatalf("Acquire error %v is not a circuit_open rejection", err)
	}
	switch st {
	case Closed, Disabled:
		if err != nil {
			t.Fatalf("%s breaker rejected: %v", st, err)
		}
	case ForcedOpen:
		if err == nil || r.RetryAfter != 0 {
			t.Fatalf("forced-open breaker: Acquire error %v", err)
		}
	case Open:
		left := m.openedAt + m.openFor - now
		if left <= 0 {
			t.Fatalf("State says open %v after the open duration %v ended", time.Duration(-left), time.Duration(m.openFor))
		}
		if err == nil || r.RetryAfter != time.Duration(left) {
			t.Fatalf("open breaker with %v left: Acquire error %v", time.Duration(left), err)
		}
	case HalfOpen:
		if free := m.probes < m.o.HalfOpenCalls; free != (err == nil) {
			t.Fatalf("half-open with %d of %d probes in flight: Acquire error %v", m.probes, m.o.HalfOpenCalls, err)
		}
		if err != nil && r.RetryAfter != 0 {
			t.Fatalf("half-open rejection with RetryAfter %v", r.RetryAfter)
		}
		if err == nil {
			m.probes++
		}
	}
	if err != nil {
		return false
	}
	m.held = append(m.held, fuzzHeld{p: p, state: st, gen: gen})
	return true
}

func (m *fuzzModel) done(i int, class sluice.Class) {
	t := m.t
	h := m.held[i]
	m.held = append(m.held[:i], m.held[i+1:]...)
	o := sluice.Outcome{Class: class, Latency: m.latencyOf()}
	if class == sluice.Dropped {
		o.Latency = 0
	}
	before := m.b.Metrics()
	h.p.Done(o)
	after := m.b.Metrics()
	if h.state == HalfOpen {
		m.probes--
	}
	current := before.Generation == h.gen && class.Ran()
	switch {
	case current && h.state == Closed:
		c := codeRan
		if class == sluice.Failure {
			c |= codeFail
		}
		if m.o.SlowCallThreshold > 0 && o.Latency > m.o.SlowCallThreshold {
			c |= codeSlow
		}
		m.records = append(m.records, fuzzRecord{at: m.clk.Nanotime(), code: c})
		switch {
		case m.o.ConsecutiveFailures == 0:
		case c&codeFail != 0:
			m.consec++
		default:
			m.consec = 0
		}
		w := m.window()
		trip := m.b.cfg.tripsOn(w) || (m.o.ConsecutiveFailures > 0 && m.consec >= m.o.ConsecutiveFailures)
		if got := after.State == Open; got != trip {
			t.Fatalf("after %s with window %+v, %d consecutive failures: state %s", class, w, m.consec, after.State)
		}
	case current && h.state == HalfOpen:
		failed := class == sluice.Failure || (m.o.SlowCallRate > 0 && o.Latency > m.o.SlowCallThreshold)
		switch {
		case failed && after.State != Open:
			t.Fatalf("failed probe left the breaker %s", after.State)
		case !failed && before.ProbeSuccesses+1 >= m.b.cfg.successes && after.State != Closed:
			t.Fatalf("probe success %d of %d left the breaker %s", before.ProbeSuccesses+1, m.b.cfg.successes, after.State)
		case !failed && before.ProbeSuccesses+1 < m.b.cfg.successes && after.State != HalfOpen:
			t.Fatalf("probe success %d of %d left the breaker %s", before.ProbeSuccesses+1, m.b.cfg.successes, after.State)
		}
	default:
		if after.Generation != before.Generation {
			t.Fatalf("a stale or %s outcome changed the state from %s to %s", class, before.State, after.State)
		}
	}
}

// window returns the model's view of the breaker's window now.
func (m *fuzzModel) window() counts {
	recs := m.records
	if n := m.o.CountWindow; n > 0 && len(recs) > n {
		recs = recs[len(recs)-n:]
	}
	var w counts
	width := int64(m.o.TimeWindow) / int64(max(m.o.Buckets, 1))
	now := m.clk.Nanotime()
	for _, r := range recs {
		if m.o.TimeWindow > 0 && r.at/width <= now/width-int64(m.o.Buckets) {
			continue
		}
		w.calls++
		w.failures += uint64(r.code&codeFail) >> 1
		w.slow += uint64(r.code&codeSlow) >> 2
	}
	return w
}

func (m *fuzzModel) check() {
	t := m.t
	got := m.b.Metrics()
	if got.State == Closed && got.Generation != m.closedGen {
		m.records, m.consec, m.closedGen = nil, 0, got.Generation
	}
	if got.Probes != m.probes || got.Probes > m.o.HalfOpenCalls {
		t.Fatalf("Probes = %d, want %d (at most %d)", got.Probes, m.probes, m.o.HalfOpenCalls)
	}
	want := m.window()
	if got.Calls != int(want.calls) || got.Failures != int(want.failures) || got.SlowCalls != int(want.slow) {
		t.Fatalf("window = %d calls, %d failures, %d slow; want %+v", got.Calls, got.Failures, got.SlowCalls, want)
	}
	if got.ConsecutiveFailures != m.consec {
		t.Fatalf("ConsecutiveFailures = %d, want %d", got.ConsecutiveFailures, m.consec)
	}
	if got.State == Open {
		if left := m.openedAt + m.openFor - m.clk.Nanotime(); got.OpenFor != time.Duration(left) {
			t.Fatalf("OpenFor = %v, want %v", got.OpenFor, time.Duration(left))
		}
	}
}
