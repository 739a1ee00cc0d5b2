package hedge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

// att is one attempt of a held call: the test decides how it ends.
type att struct {
	ctx context.Context
	end chan sluice.Result
}

// held is a sluice.Call whose attempts report themselves on started and
// end when the test sends them a Result, or with an Ignored Result carrying
// Value "cancelled" when their context ends.
type held struct {
	started  chan *att
	count    atomic.Int64
	finished chan struct{}
}

func newHeld() *held {
	return &held{started: make(chan *att, 8), finished: make(chan struct{}, 8)}
}

func (h *held) next(ctx context.Context) sluice.Result {
	h.count.Add(1)
	defer func() { h.finished <- struct{}{} }()
	a := &att{ctx: ctx, end: make(chan sluice.Result)}
	h.started <- a
	select {
	case r := <-a.end:
		return r
	case <-ctx.Done():
		return sluice.Result{Value: "cancelled", Outcome: sluice.Outcome{Class: sluice.Ignored, Err: ctx.Err()}}
	}
}

// waitAll waits until every attempt started has returned. Call it after Run
// has returned: no attempt starts after that.
func (h *held) waitAll() {
	for range h.count.Load() {
		<-h.finished
	}
}

func runAsync(p *Policy, ctx context.Context, next sluice.Call) <-chan sluice.Result {
	out := make(chan sluice.Result, 1)
	go func() { out <- p.Run(ctx, next) }()
	return out
}

func success(v any) sluice.Result { return sluice.Result{Value: v} }

func failure(v any, err error) sluice.Result {
	return sluice.Result{Value: v, Outcome: sluice.Outcome{Class: sluice.Failure, Err: err}}
}

// blockUntil waits until the fake clock has n timers.
func blockUntil(t *testing.T, fc *clock.Fake, n int) {
	t.Helper()
	if err := fc.BlockUntil(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// discards records the values given to Discard.
type discards struct {
	mu   sync.Mutex
	vals []any
	ch   chan any
}

func newDiscards() *discards { return &discards{ch: make(chan any, 8)} }

func (d *discards) discard(v any) {
	d.mu.Lock()
	d.vals = append(d.vals, v)
	d.mu.Unlock()
	d.ch <- v
}

func (d *discards) got() []any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.vals)
}

func mustNew(t *testing.T, opts Options) *Policy {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const delay = 10 * time.Millisecond

func TestNewNamesEveryBadOption(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		names []string
	}{
		{"delay, hedges, quantile", Options{Delay: -1, MaxHedges: -1, Quantile: 1}, []string{"Delay -1ns", "MaxHedges -1", "Quantile 1"}},
		{"NaN quantile, window, max delay", Options{Delay: delay, Quantile: math.NaN(), Window: -1, MaxDelay: delay / 2},
			[]string{"Quantile NaN", "Window -1", "MaxDelay 5ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			invalidtest.Check(t, err, nil, tt.names...)
		})
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"zero delay", Options{}},
		{"negative delay", Options{Delay: -1}},
		{"negative hedges", Options{Delay: delay, MaxHedges: -1}},
		{"quantile one", Options{Delay: delay, Quantile: 1}},
		{"negative quantile", Options{Delay: delay, Quantile: -0.5}},
		{"negative window", Options{Delay: delay, Quantile: 0.9, Window: -1}},
		{"max delay below delay", Options{Delay: delay, Quantile: 0.9, MaxDelay: delay / 2}},
	}
	for _, tt := range tests {
		if _, err := New(tt.opts); err == nil {
			t.Errorf("%s: New succeeded, want an error", tt.name)
		}
	}
	p, err := New(Options{Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	if p.maxHedges != 1 || p.Delay() != delay {
		t.Errorf("defaults: maxHedges %d, delay %v; want 1, %v", p.maxHedges, p.Delay(), delay)
	}
}

func TestPrimaryFastNoHedge(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Delay: delay, Clock: fc})
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay - time.Millisecond)
	a0.end <- success("primary")
	if r := <-out; r.Value != "primary" || r.Err != nil {
		t.Errorf("Run = %+v, want primary", r)
	}
	h.waitAll()
	if n := fc.Timers(); n != 0 {
		t.Errorf("%d timers left, want the hedge timer stopped", n)
	}
	if err := a0.ctx.Err(); err != nil {
		t.Errorf("winner's context ended: %v", err)
	}
	if got, want := p.Stats(), (Stats{Calls: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestPrimarySlowHedgeWins(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	d := newDiscards()
	p := mustNew(t, Options{Delay: delay, Clock: fc, Discard: d.discard})
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay)
	a1 := <-h.started
	a1.end <- success("hedge")
	if r := <-out; r.Value != "hedge" || r.Err != nil {
		t.Errorf("Run = %+v, want hedge", r)
	}
	<-a0.ctx.Done()
	if cause := context.Cause(a0.ctx); cause != ErrLost {
		t.Errorf("primary cancelled with cause %v, want ErrLost", cause)
	}
	if err := a1.ctx.Err(); err != nil {
		t.Errorf("winner's context ended: %v", err)
	}
	// The primary ends after the race with a Value: it goes to Discard.
	if v := <-d.ch; v != "cancelled" {
		t.Errorf("discarded %v, want the primary's late value", v)
	}
	h.waitAll()
	if got, want := p.Stats(), (Stats{Calls: 1, Hedges: 1, Wins: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// TestPrimaryWinsAfterHedgeStarted: the hedge that lost is counted once
// it ended (its Value discarded).
func TestPrimaryWinsAfterHedgeStarted(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	d := newDiscards()
	p := mustNew(t, Options{Delay: delay, Clock: fc, Discard: d.discard})
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay)
	a1 := <-h.started
	a0.end <- success("primary")
	if r := <-out; r.Value != "primary" {
		t.Errorf("Run = %+v, want primary", r)
	}
	<-a1.ctx.Done()
	h.waitAll()
	if v := <-d.ch; v != "cancelled" {
		t.Errorf("discarded %v, want the hedge's late value", v)
	}
	if got, want := p.Stats(), (Stats{Calls: 1, Hedges: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// budget grants its tokens, then refuses; every request is reported on asked.
type budget struct {
	tokens atomic.Int64
	asked  chan struct{}
}

func (b *budget) TryWithdraw() bool {
	b.asked <- struct{}{}
	return b.tokens.Add(-1) >= 0
}

func TestBudget(t *testing.T) {
	for _, tokens := range []int64{0, 1} {
		fc := clock.NewFake(time.Time{})
		b := &budget{asked: make(chan struct{}, 4)}
		b.tokens.Store(tokens)
		d := newDiscards()
		p := mustNew(t, Options{Delay: delay, MaxHedges: 2, Clock: fc, Budget: b, Discard: d.discard})
		h := newHeld()
		out := runAsync(p, context.Background(), h.next)
		a0 := <-h.started
		attempts := []*att{a0}
		for range 2 {
			blockUntil(t, fc, 1)
			fc.Advance(delay)
			<-b.asked
			if int64(len(attempts)) > tokens {
				break
			}
			attempts = append(attempts, <-h.started)
		}
		if n := fc.Timers(); n != 0 {
			t.Errorf("tokens %d: %d timers armed after the budget refused, want 0", tokens, n)
		}
		a0.end <- success("primary")
		<-out
		h.waitAll()
		for range tokens { // the hedges that lost are counted once they ended
			<-d.ch
		}
		if got, want := p.Stats(), (Stats{Calls: 1, Hedges: uint64(tokens), Denied: 1}); got != want {
			t.Errorf("tokens %d: Stats() = %+v, want %+v", tokens, got, want)
		}
		if got := h.count.Load(); got != tokens+1 {
			t.Errorf("tokens %d: %d attempts, want %d", tokens, got, tokens+1)
		}
	}
}

// seenPolicy returns a Policy of up to maxHedges hedges on a fake clock,
// recording its discards; each failure Run sees is sent on seen (by
// Final), so that a test can order them.
func seenPolicy(t *testing.T, maxHedges int) (p *Policy, fc *clock.Fake, d *discards, seen chan sluice.Result) {
	fc, d, seen = clock.NewFake(time.Time{}), newDiscards(), make(chan sluice.Result)
	p = mustNew(t, Options{
		Delay:     delay,
		MaxHedges: maxHedges,
		Clock:     fc,
		Discard:   d.discard,
		Final:     func(r sluice.Result) bool { seen <- r; return false },
	})
	return p, fc, d, seen
}

func TestAllFailReturnsLastFailure(t *testing.T) {
	p, fc, d, seen := seenPolicy(t, 2)
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	as := []*att{<-h.started}
	for range 2 {
		blockUntil(t, fc, 1)
		fc.Advance(delay)
		as = append(as, <-h.started)
	}
	errs := []error{errors.New("e0"), errors.New("e1"), errors.New("e2")}
	for _, i := range []int{1, 0, 2} {
		as[i].end <- failure(i, errs[i])
		<-seen
	}
	r := <-out
	if r.Err != errs[2] || r.Value != 2 || r.Class != sluice.Failure {
		t.Errorf("Run = %+v, want the last failure (e2)", r)
	}
	h.waitAll()
	if got, want := d.got(), []any{1, 0}; !slices.Equal(got, want) {
		t.Errorf("discarded %v, want %v", got, want)
	}
}

// TestRefusedHedgeKeepsFailure ends the first attempt with a failure while
// the hedge is under way, then the hedge is refused before it ran
// (Dropped, as a breaker inside the hedge refuses it): Run returns the
// failure of the attempt that ran, as an unhedged call would have, not
// the refusal. (It returned the refusal, and discarded the failure's
// value.)
func TestRefusedHedgeKeepsFailure(t *testing.T) {
	p, fc, d, seen := seenPolicy(t, 1)
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay)
	a1 := <-h.started
	e0 := errors.New("e0")
	a0.end <- failure(0, e0)
	<-seen
	refused := sluice.Result{Value: 1, Outcome: sluice.Outcome{Class: sluice.Dropped, Err: sluice.ErrRejected}}
	a1.end <- refused
	<-seen
	if r := <-out; r.Err != e0 || r.Value != 0 || r.Class != sluice.Failure {
		t.Errorf("Run = %+v, want the first attempt's failure (e0)", r)
	}
	h.waitAll()
	if got, want := d.got(), []any{1}; !slices.Equal(got, want) {
		t.Errorf("discarded %v, want %v (the refusal's)", got, want)
	}

	// Refused alone, the hedge's refusal is not kept over nothing: a
	// first attempt refused is Run's answer.
	out = runAsync(p, context.Background(), func(context.Context) sluice.Result { return refused })
	if r := <-seen; r.Class != sluice.Dropped {
		t.Fatalf("saw %+v", r)
	}
	if r := <-out; r.Class != sluice.Dropped || r.Value != 1 {
		t.Errorf("Run = %+v, want the refusal", r)
	}
}

// TestRefusedHedgeKeepsRefusal refuses the first attempt once its hedge
// has started, then the hedge: Run returns the first attempt's refusal,
// which an unhedged call would have had, and discards the hedge's. (The
// hedge's refusal, the last, was returned.)
func TestRefusedHedgeKeepsRefusal(t *testing.T) {
	p, fc, d, seen := seenPolicy(t, 1)
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay)
	a1 := <-h.started
	e0, e1 := errors.New("e0"), errors.New("e1")
	a0.end <- sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: e0}}
	<-seen
	a1.end <- sluice.Result{Value: 1, Outcome: sluice.Outcome{Class: sluice.Dropped, Err: e1}}
	<-seen
	if r := <-out; r.Err != e0 || r.Class != sluice.Dropped {
		t.Errorf("Run = %+v, want the first attempt's refusal (e0)", r)
	}
	h.waitAll()
	if got, want := d.got(), []any{1}; !slices.Equal(got, want) {
		t.Errorf("discarded %v, want %v (the hedge's)", got, want)
	}
}

func TestFailureDoesNotHedgeEarly(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Delay: delay, Clock: fc})
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	errBad := errors.New("bad")
	a0.end <- failure(nil, errBad)
	if r := <-out; r.Err != errBad {
		t.Errorf("Run = %+v, want the primary's failure", r)
	}
	h.waitAll()
	if n := fc.Timers(); n != 0 || h.count.Load() != 1 {
		t.Errorf("timers %d, attempts %d; want 0, 1", n, h.count.Load())
	}
}

func TestFinalEndsRace(t *testing.T) {
	errNotFound := errors.New("not found")
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{
		Delay: delay, Clock: fc,
		Final: func(r sluice.Result) bool { return errors.Is(r.Err, errNotFound) },
	})
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay)
	a1 := <-h.started
	a1.end <- failure(nil, errNotFound)
	if r := <-out; r.Err != errNotFound {
		t.Errorf("Run = %+v, want not found at once", r)
	}
	<-a0.ctx.Done()
	h.waitAll()
}

func TestContextEndStopsHedging(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Delay: delay, Clock: fc})
	h := newHeld()
	ctx, cancel := context.WithCancel(context.Background())
	out := runAsync(p, ctx, h.next)
	<-h.started
	blockUntil(t, fc, 1)
	cancel()
	r := <-out // the primary sees the cancellation and ends; Run returns it
	if r.Class != sluice.Ignored || !errors.Is(r.Err, context.Canceled) {
		t.Errorf("Run = %+v, want the primary's Ignored result", r)
	}
	fc.Advance(delay)
	h.waitAll()
	if got := h.count.Load(); got != 1 {
		t.Errorf("%d attempts, want 1", got)
	}
}

func TestPanicReachesCaller(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Delay: delay, Clock: fc})
	h := newHeld()
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		p.Run(context.Background(), func(ctx context.Context) sluice.Result {
			r := h.next(ctx)
			if r.Value == "boom" {
				panic("boom")
			}
			return r
		})
	}()
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay)
	a1 := <-h.started
	a0.end <- success("boom")
	if v := <-recovered; v != "boom" {
		t.Errorf("recovered %v, want boom", v)
	}
	<-a1.ctx.Done() // the other attempt is cancelled
	h.waitAll()
}

func TestLoserPanicIsDropped(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Delay: delay, Clock: fc})
	h := newHeld()
	out := runAsync(p, context.Background(), func(ctx context.Context) sluice.Result {
		r := h.next(ctx)
		if r.Value == "cancelled" {
			panic("loser panics on cancellation")
		}
		return r
	})
	<-h.started
	blockUntil(t, fc, 1)
	fc.Advance(delay)
	a1 := <-h.started
	a1.end <- success("hedge")
	if r := <-out; r.Value != "hedge" {
		t.Errorf("Run = %+v, want hedge", r)
	}
	h.waitAll()
}

func TestGoexitReachesCaller(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Delay: delay, Clock: fc})
	exited := make(chan bool, 1)
	go func() {
		returned := false
		defer func() { exited <- !returned }()
		p.Run(context.Background(), func(context.Context) sluice.Result {
			runtime.Goexit()
			return sluice.Result{}
		})
		returned = true
	}()
	if !<-exited {
		t.Error("Run returned, want the Goexit repeated in its goroutine")
	}
}

func BenchmarkRunNoHedge(b *testing.B) {
	p, err := New(Options{Delay: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	next := func(context.Context) sluice.Result { return sluice.Result{} }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Run(ctx, next)
		}
	})
}

// refundBudget is a budget of tokens that takes back refunds, and says
// so on refunded.
type refundBudget struct {
	tokens   atomic.Int64
	refunded chan struct{}
}

func (b *refundBudget) TryWithdraw() bool { return b.tokens.Add(-1) >= 0 }
func (b *refundBudget) Refund() {
	b.tokens.Add(1)
	b.refunded <- struct{}{}
}

// TestHedgeNotSentRefunds has a hedge decide not to send itself
// (ErrNotSent), while the race is on and once it is over: each time its
// token goes back to the budget and Stats does not count it as a hedge.
// (A hedge not sent kept its token, so a route whose calls were streams
// spent its budget on hedges it never sent; then it was still counted in
// Stats.Hedges, and so in sluice_hedges_total.)
func TestHedgeNotSentRefunds(t *testing.T) {
	notSent := sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: fmt.Errorf("a stream: %w", ErrNotSent)}}
	for _, during := range []bool{true, false} {
		fc := clock.NewFake(time.Time{})
		b := &refundBudget{refunded: make(chan struct{}, 1)}
		b.tokens.Store(1)
		p := mustNew(t, Options{Delay: delay, MaxHedges: 1, Clock: fc, Budget: b})
		first, hedgeStarted, hedgeEnd := make(chan struct{}), make(chan struct{}), make(chan struct{})
		firstStarted, hedgeDone := make(chan struct{}), make(chan struct{})
		var n atomic.Int64
		next := func(ctx context.Context) sluice.Result {
			if n.Add(1) == 1 {
				close(firstStarted)
				<-first
				return success("first")
			}
			defer close(hedgeDone)
			close(hedgeStarted)
			<-hedgeEnd // the hedge waits for its request's end, whatever ctx does
			return notSent
		}
		out := runAsync(p, context.Background(), next)
		<-firstStarted // so that the hedge is the second call of next
		blockUntil(t, fc, 1)
		fc.Advance(delay)
		<-hedgeStarted
		if during {
			close(hedgeEnd)
			<-hedgeDone
			close(first)
			<-out
		} else {
			close(first)
			<-out
			close(hedgeEnd) // the race is over: the result comes late
			<-hedgeDone
		}
		select {
		case <-b.refunded:
		case <-time.After(10 * time.Second):
			t.Fatalf("during the race %v: the hedge's token was not given back", during)
		}
		if got, want := p.Stats(), (Stats{Calls: 1}); got != want {
			t.Errorf("during the race %v: Stats() = %+v, want %+v", during, got, want)
		}
		if n := b.tokens.Load(); n != 1 {
			t.Errorf("during the race %v: %d tokens left, want the 1 given back", during, n)
		}
	}
}
