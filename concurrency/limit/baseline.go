package limit

import "time"

// baseline estimates a no-load latency from a smoothed latency signal, so
// that it can neither collapse nor drift.
//
// It is a windowed minimum of a slowly smoothed latency (an exponential
// average over baselineSpan × the owner's smoothing, in samples): the minimum
// over the current and the previous half-window. Because it takes smoothed
// values, one fast outlier moves it by at most the smoothing weight, instead
// of resetting it to the outlier as a minimum of raw samples does (Netflix's
// Vegas collapses this way); and because the smoothing is slow, the minimum
// of a noisy latency (exponential service times) stays near its mean instead
// of sinking into its low tail. It follows a lower latency at once.
//
// It rises only in two cases, so that it does not creep toward the loaded
// latency under sustained congestion (the seed design's fault, after which
// congestion is no longer seen):
//   - the window's minimum stayed above rebase × the baseline for a whole
//     window: the latency is high whatever the limit does, so the path has
//     changed (or the limit is already at its floor); the baseline is rebased
//     to the window's minimum;
//   - no congestion was reported (markCongested) during the window: the
//     latency rose mildly without the algorithm seeing any queue, so the
//     baseline may follow it. This also undoes the slow downward bias of a
//     minimum taken over noisy values.
//
// A baseline is not safe for concurrent use; its owner's lock protects it.
type baseline struct {
	window int64   // nanoseconds; a half-window is one bucket
	rebase float64 // ratio above which a sustained rise is accepted
	weight float64 // EMA weight of a raw sample in slow

	slow float64 // slowly smoothed latency, nanoseconds
	warm int     // samples averaged while warming up
	sq   float64 // sum of squared deviations from slow while warming up

	// settle, when positive, lets the warm-up settle: once the warm-up
	// mean's standard error is at most settle × the mean (after at least
	// settleMin samples), the baseline stops following the mean up and
	// keeps its minimum, so that a step in latency during the warm-up shows
	// as congestion instead of being averaged in. Zero: the baseline is the
	// warm-up mean throughout.
	settle  float64
	settled bool

	value     float64 // the baseline, nanoseconds; 0 before the first sample
	cur, prev float64 // minimum of the current and previous bucket; 0 = empty
	curStart  int64   // now at the start of the current bucket
	curCong   bool    // congestion reported in the current bucket
	prevCong  bool    // congestion reported in the previous bucket
}

// settleMin is the fewest warm-up samples a settled warm-up (see
// baseline.settle) is judged on.
const settleMin = 4

// baselineSpan is how many times longer than the owner's smoothing the
// baseline's own smoothing is: 5, so that the baseline's noise is a little
// under half the compared latency's.
const baselineSpan = 5

// newBaseline returns a baseline over window nanoseconds that accepts a
// sustained rise above rebase × itself, for an owner that smooths over
// smoothing samples.
func newBaseline(window time.Duration, rebase float64, smoothing int) baseline {
	return baseline{window: int64(window), rebase: rebase, weight: windowWeight(baselineSpan * smoothing)}
}

// update feeds the latency of one sample, rtt (nanoseconds), observed at now
// and returns the baseline.
func (b *baseline) update(now int64, rtt float64) float64 {
	if float64(b.warm) < 1/b.weight {
		// Warming up: a plain mean, so that the first samples do not
		// weigh more than the later ones (Welford's update, which also
		// gives the variance).
		b.warm++
		d := rtt - b.slow
		b.slow += d / float64(b.warm)
		b.sq += d * (rtt - b.slow)
		n := float64(b.warm)
		if !b.settled && b.settle > 0 && b.warm >= settleMin && b.sq/(n*(n-1)) <= b.settle*b.settle*b.slow*b.slow {
			b.settled = true
		}
		if !b.settled || b.slow < b.value {
			b.value = b.slow
		}
		b.cur, b.curStart = b.value, now
		return b.value
	}
	b.slow = ema(b.slow, rtt, b.weight)
	s := b.slow
	if s < b.value {
		b.value = s
	}
	if now-b.curStart < b.window/2 {
		if s < b.cur {
			b.cur = s
		}
		return b.value
	}
	// The current bucket is complete: the two buckets cover a whole window.
	if b.prev != 0 {
		m := min(b.prev, b.cur)
		if m > b.value*b.rebase || (m > b.value && !b.prevCong && !b.curCong) {
			b.value = m
		}
	}
	b.prev, b.prevCong = b.cur, b.curCong
	b.cur, b.curCong, b.curStart = s, false, now
	return b.value
}

// markCongested records that the owner saw congestion against the current
// baseline, which forbids a mild rise for the current window.
func (b *baseline) markCongested() { b.curCong = true }
