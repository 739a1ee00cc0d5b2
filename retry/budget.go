package retry

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// Defaults of BudgetOptions.
const (
	// DefaultRatio is the share of recent calls that may be retried.
	DefaultRatio = 0.2
	// DefaultMinPerSecond is the rate of retries allowed whatever the traffic.
	DefaultMinPerSecond = 10.0
	// DefaultWindow is how far back a Budget remembers calls and retries.
	DefaultWindow = 10 * time.Second
)

// budgetBuckets is how many time buckets a Budget's window is made of: the
// window slides in steps of Window/budgetBuckets.
const budgetBuckets = 10

// BudgetOptions configures a Budget. The zero value gives the defaults.
type BudgetOptions struct {
	// Ratio is how many retries the budget allows per call made, over the
	// window: 0.2 lets retries add at most 20% to the load. Zero means
	// DefaultRatio; a negative value means none (only MinPerSecond is
	// allowed). It may exceed 1.
	Ratio float64
	// MinPerSecond is a floor of retries per second allowed however few calls
	// were made, so that a quiet service still retries: the budget holds
	// MinPerSecond·Window seconds of retries on top of the ratio. Zero means
	// DefaultMinPerSecond; a negative value means none.
	MinPerSecond float64
	// Window is how far back calls and retries are remembered. It slides in
	// steps of a tenth of itself, so a call or retry counts for between nine
	// and ten tenths of Window. Zero means DefaultWindow. It must be at least
	// 10ns.
	Window time.Duration
	// Clock measures the window. Nil means clock.Real.
	Clock clock.Clock
}

// Budget caps retries at a share of recent calls, so that retries cannot
// multiply the load on a failing downstream, as Finagle's RetryBudget does.
// Every call deposits once; every retry withdraws once, and a withdrawal is
// refused when the retries made over the window would exceed
// Ratio·(calls made over the window) + MinPerSecond·Window. A hedging policy
// uses it the same way: Deposit per call, TryWithdraw per extra request.
//
// Counts live in a ring of ten time buckets on the Budget's clock, updated
// with atomic compare-and-swap: Deposit and TryWithdraw take no lock and do
// not allocate. A Budget is safe for concurrent use and may be shared by
// several policies (retries of several routes to one downstream, or a
// retry and a hedge policy); the zero value is not usable, use NewBudget.
type Budget struct {
	ratio   float64
	reserve float64 // MinPerSecond·Window, in retries
	width   int64   // nanoseconds per bucket
	clock   clock.Clock

	// Each word packs a bucket's epoch (high 32 bits) and its count (low 32
	// bits), so that a bucket is reset and counted in one atomic step.
	deposits    [budgetBuckets]atomic.Uint64
	withdrawals [budgetBuckets]atomic.Uint64
	refused     atomic.Uint64
}

// NewBudget returns a Budget configured by opts. For unusable opts it
// returns an error matching sluice.ErrInvalidOptions (errors.Is) that names
// every unusable option.
func NewBudget(opts BudgetOptions) (*Budget, error) {
	ps := invalid.Problems{Prefix: "retry: budget: invalid options"}
	if math.IsNaN(opts.Ratio) || math.IsInf(opts.Ratio, 0) {
		ps.Addf("Ratio %v is not a finite number", opts.Ratio)
	}
	if math.IsNaN(opts.MinPerSecond) || math.IsInf(opts.MinPerSecond, 0) {
		ps.Addf("MinPerSecond %v is not a finite number", opts.MinPerSecond)
	}
	if opts.Window < 0 || (opts.Window > 0 && opts.Window < budgetBuckets) {
		ps.Addf("Window %v is below 10ns", opts.Window)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	ratio := orDefault(opts.Ratio, DefaultRatio)
	perSecond := orDefault(opts.MinPerSecond, DefaultMinPerSecond)
	window := opts.Window
	if window == 0 {
		window = DefaultWindow
	}
	return &Budget{
		ratio:   ratio,
		reserve: perSecond * window.Seconds(),
		width:   int64(window / budgetBuckets),
		clock:   clock.Or(opts.Clock),
	}, nil
}

// orDefault maps zero to def and negative values to zero.
func orDefault(v, def float64) float64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Deposit records one call. Call it once per call, before or after its first
// attempt, never per retry.
func (b *Budget) Deposit() {
	e := b.epoch()
	bump(&b.deposits[e%budgetBuckets], e)
}

// TryWithdraw asks for one retry. It reports whether the budget allows it,
// and if so counts it; a refusal is counted in Refused.
func (b *Budget) TryWithdraw() bool {
	e := b.epoch()
	allowed := b.allowed(e)
	slot := &b.withdrawals[e%budgetBuckets]
	others := sum(&b.withdrawals, e, e%budgetBuckets)
	for {
		old := slot.Load()
		n := count(old, e)
		if float64(others+uint64(n)+1) > allowed || n == math.MaxUint32 {
			b.refused.Add(1)
			return false
		}
		if slot.CompareAndSwap(old, pack(e, n+1)) {
			return true
		}
	}
}

// Refund gives back one retry that TryWithdraw granted but that was not
// made after all, while the window still counts it: the newest bucket of
// the window that counts a withdrawal counts one less.
func (b *Budget) Refund() {
	e := b.epoch()
	for back := range uint32(budgetBuckets) {
		slot := &b.withdrawals[(e-back)%budgetBuckets]
		for {
			old := slot.Load()
			n := count(old, e-back)
			if n == 0 {
				break
			}
			if slot.CompareAndSwap(old, pack(e-back, n-1)) {
				return
			}
		}
	}
}

// Available returns how many retries the budget would allow now, if no call
// were made in the meantime.
func (b *Budget) Available() int {
	e := b.epoch()
	left := b.allowed(e) - float64(sum(&b.withdrawals, e, budgetBuckets))
	if left < 1 {
		return 0
	}
	return int(left)
}

// Refused returns how many withdrawals the budget has refused since it was
// made.
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// allowed returns how many retries the window allows at epoch e.
func (b *Budget) allowed(e uint32) float64 {
	return b.ratio*float64(sum(&b.deposits, e, budgetBuckets)) + b.reserve
}

// epoch returns the number of the current bucket. It wraps after 2^32
// buckets, which at worst lets a bucket left untouched for that long count
// once more.
func (b *Budget) epoch() uint32 { return uint32(b.clock.Nanotime() / b.width) }

func pack(e, n uint32) uint64 { return uint64(e)<<32 | uint64(n) }

// count returns the count in word w if it belongs to epoch e, else zero.
func count(w uint64, e uint32) uint32 {
	if uint32(w>>32) != e {
		return 0
	}
	return uint32(w)
}

// bump adds one to the count of slot for epoch e, resetting it first if it
// holds an older epoch. It saturates rather than wrap.
func bump(slot *atomic.Uint64, e uint32) {
	for {
		old := slot.Load()
		n := count(old, e)
		if n == math.MaxUint32 || slot.CompareAndSwap(old, pack(e, n+1)) {
			return
		}
	}
}

// sum adds up the counts of the buckets of the window ending at epoch e,
// leaving out bucket skip (budgetBuckets to leave out none).
func sum(ring *[budgetBuckets]atomic.Uint64, e, skip uint32) uint64 {
	var s uint64
	for i := range ring {
		if uint32(i) == skip {
			continue
		}
		w := ring[i].Load()
		if e-uint32(w>>32) < budgetBuckets {
			s += uint64(uint32(w))
		}
	}
	return s
}
