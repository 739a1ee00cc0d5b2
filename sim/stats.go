package sim

import (
	"math"
	"strconv"
	"time"
)

// Num is a figure that may be missing: NaN means not applicable (printed
// "-", null in JSON) and +Inf means never (printed "never", null in JSON).
type Num float64

// MarshalJSON writes the number, or null when it is NaN or infinite.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, round(f, 6), 'g', -1, 64), nil
}

func round(f float64, digits int) float64 {
	if f == 0 {
		return 0
	}
	p := math.Pow(10, float64(digits)-math.Ceil(math.Log10(math.Abs(f))))
	return math.Round(f*p) / p
}

// Segment holds the figures of one segment of a run: the time from the
// start (or a step) to the next step (or the end). Rates count user
// requests that arrived in the segment after the warm-up.
type Segment struct {
	// Start and End bound the segment, in seconds of simulated time.
	Start float64 `json:"start_s"`
	End   float64 `json:"end_s"`
	// Load is the offered load as a fraction of the segment's capacity.
	Load float64 `json:"load"`
	// Optimum is the optimal limit (Scenario.Optimum) in the segment.
	Optimum float64 `json:"optimum"`
	Figures
	// MeanLimit, CV and InBand describe the limit over the steady part of
	// the segment (from Settle after its start): its mean, its coefficient
	// of variation, and the fraction of ticks inside the band around the
	// optimum (see Conv).
	MeanLimit Num `json:"mean_limit"`
	CV        Num `json:"cv"`
	InBand    Num `json:"in_band"`
	// Conv is the convergence time in seconds from the start of the
	// segment (see the package documentation); ConvStrict the same
	// without the sliding window: the limit never leaves the band again.
	Conv       Num `json:"conv_s"`
	ConvStrict Num `json:"conv_strict_s"`
}

// Figures are the request-level figures of a segment or a whole run.
type Figures struct {
	// Goodput is the requests that succeeded within their deadline per
	// second, as a fraction of the capacity (workers / mean work).
	Goodput Num `json:"goodput"`
	// Offered is the arrival rate as a fraction of the capacity.
	Offered Num `json:"offered"`
	// Served is the fraction of user requests that succeeded.
	Served Num `json:"served"`
	// P50, P99 and P999 are latencies, in milliseconds, of admitted
	// attempts, from the attempt's arrival to its response; an attempt
	// that timed out counts at its deadline.
	P50  Num `json:"p50_ms"`
	P99  Num `json:"p99_ms"`
	P999 Num `json:"p999_ms"`
	// NoLoadP99 is the p99 latency the same requests would have without
	// any queue (work + network delay); P99Ratio is P99 / NoLoadP99.
	NoLoadP99 Num `json:"noload_p99_ms"`
	P99Ratio  Num `json:"p99_ratio"`
	// Rejected is the fraction of attempts rejected by the limit.
	Rejected Num `json:"rejected"`
	// TimedOut is the fraction of user requests that timed out.
	TimedOut Num `json:"timed_out"`
	// ClassServed is Served per priority class, when there are classes.
	ClassServed []Num `json:"class_served,omitempty"`
}

// Result is the outcome of one algorithm on one scenario.
type Result struct {
	Scenario  string `json:"scenario"`
	Algorithm string `json:"algorithm"`
	// Unlimited is true when the limit never bound (the no-limit
	// baseline); the limit's figures are then not applicable.
	Unlimited bool `json:"unlimited,omitempty"`
	Figures
	// Optimum, MeanLimit and CV are those of the last segment; CVMax is
	// the largest CV of any segment.
	Optimum   float64 `json:"optimum"`
	MeanLimit Num     `json:"mean_limit"`
	CV        Num     `json:"cv"`
	CVMax     Num     `json:"cv_max"`
	// Conv lists the convergence time of each segment that starts with a
	// step, in seconds.
	Conv []Num `json:"conv_s,omitempty"`
	// Drift is how far the mean limit moved over the last segment: the
	// mean over its last tenth minus the mean over its second tenth of
	// the steady part, as a fraction of the optimum.
	Drift    Num       `json:"drift"`
	Segments []Segment `json:"segments"`
	// Series is the limit at every tick (Tick apart, from time 0), for
	// plots. Not part of the JSON.
	Series []int32         `json:"-"`
	Tick   time.Duration   `json:"-"`
	Steps  []time.Duration `json:"-"`
}

// segAcc accumulates a segment's request counts.
type segAcc struct {
	optimum, load            float64
	users, good, timeouts    int64
	attempts, attemptRejects int64
	classUsers, classGood    [maxClasses]int64
	lat, ideal               *histogram
}

func (s *segAcc) init() { s.lat, s.ideal = new(histogram), new(histogram) }

// histogram buckets latencies logarithmically: 128 buckets per power of
// two (at most 0.8% wide), from 1 ns.
type histogram struct {
	n int64
	b [histBuckets]int64
}

const (
	histSub     = 7 // log2 of the buckets per power of two
	histBuckets = 48 << histSub
)

func (h *histogram) add(ns int64) {
	bits := math.Float64bits(float64(max(ns, 1)))
	i := int(bits>>52&0x7ff-1023)<<histSub | int(bits>>(52-histSub)&(1<<histSub-1))
	h.b[min(i, histBuckets-1)]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	h.n += o.n
	for i := range h.b {
		h.b[i] += o.b[i]
	}
}

// quantile returns the q-quantile in milliseconds (the middle of its
// bucket), NaN when empty.
func (h *histogram) quantile(q float64) Num {
	if h.n == 0 {
		return Num(math.NaN())
	}
	rank := max(1, int64(math.Ceil(q*float64(h.n))))
	var c int64
	for i, v := range h.b {
		c += v
		if c >= rank {
			e, m := i>>histSub, i&(1<<histSub-1)
			return Num(math.Ldexp(1+(float64(m)+0.5)/(1<<histSub), e) / 1e6)
		}
	}
	return Num(math.NaN())
}

func ratio(a, b int64) Num {
	if b == 0 {
		return Num(math.NaN())
	}
	return Num(float64(a) / float64(b))
}

// figures computes the request figures of the accumulated counts over
// capSeconds (capacity × measured seconds, in requests).
func figures(a *segAcc, capReq float64, nclass int) Figures {
	f := Figures{
		Served:    ratio(a.good, a.users),
		P50:       a.lat.quantile(0.5),
		P99:       a.lat.quantile(0.99),
		P999:      a.lat.quantile(0.999),
		NoLoadP99: a.ideal.quantile(0.99),
		Rejected:  ratio(a.attemptRejects, a.attempts),
		TimedOut:  ratio(a.timeouts, a.users),
		Goodput:   Num(math.NaN()),
		Offered:   Num(math.NaN()),
	}
	if capReq > 0 {
		f.Goodput = Num(float64(a.good) / capReq)
		f.Offered = Num(float64(a.users) / capReq)
	}
	f.P99Ratio = f.P99 / f.NoLoadP99
	if nclass > 1 {
		for c := range nclass {
			f.ClassServed = append(f.ClassServed, ratio(a.classGood[c], a.classUsers[c]))
		}
	}
	return f
}

// result turns the engine's accumulators into a Result.
func (e *engine) result(name string) *Result {
	sc := &e.sc
	r := &Result{
		Scenario: sc.Name, Algorithm: name, Series: e.series, Tick: sc.Tick,
		Unlimited: true,
	}
	for _, v := range e.series {
		if v < Unlimited {
			r.Unlimited = false
			break
		}
	}
	total := segAcc{}
	total.init()
	totalCap := 0.0
	workers := sc.Workers
	stepIdx := 0
	nan := Num(math.NaN())
	r.CVMax = nan
	for i, start := range e.segStarts {
		end := int64(sc.Duration)
		if i+1 < len(e.segStarts) {
			end = e.segStarts[i+1]
		}
		for stepIdx < len(sc.Steps) && int64(sc.Steps[stepIdx].At) <= start {
			if w := sc.Steps[stepIdx].Workers; w > 0 {
				workers = w
			}
			stepIdx++
		}
		a := &e.segs[i]
		measured := float64(end-max(start, int64(sc.Warmup))) / 1e9
		capReq := 0.0
		if measured > 0 {
			capReq = sc.Capacity(workers) * measured
		}
		seg := Segment{
			Start: float64(start) / 1e9, End: float64(end) / 1e9,
			Load: a.load, Optimum: a.optimum,
			Figures:   figures(a, capReq, e.nclass),
			MeanLimit: nan, CV: nan, InBand: nan, Conv: nan, ConvStrict: nan,
		}
		if !r.Unlimited {
			e.limitFigures(&seg, start, end)
			if !math.IsNaN(float64(seg.CV)) && (math.IsNaN(float64(r.CVMax)) || seg.CV > r.CVMax) {
				r.CVMax = seg.CV
			}
			if i > 0 {
				r.Conv = append(r.Conv, seg.Conv)
			}
		}
		r.Segments = append(r.Segments, seg)
		total.users += a.users
		total.good += a.good
		total.timeouts += a.timeouts
		total.attempts += a.attempts
		total.attemptRejects += a.attemptRejects
		for c := range maxClasses {
			total.classUsers[c] += a.classUsers[c]
			total.classGood[c] += a.classGood[c]
		}
		total.lat.merge(a.lat)
		total.ideal.merge(a.ideal)
		totalCap += capReq
	}
	r.Figures = figures(&total, totalCap, e.nclass)
	last := r.Segments[len(r.Segments)-1]
	r.Optimum, r.MeanLimit, r.CV = last.Optimum, last.MeanLimit, last.CV
	r.Drift = nan
	if !r.Unlimited {
		r.Drift = e.drift(e.segStarts[len(e.segStarts)-1], last.Optimum)
	}
	return r
}

// ticksOf returns the tick indexes [a, b) of the time range [from, to).
func (e *engine) ticksOf(from, to int64) (int, int) {
	t := int64(e.sc.Tick)
	a := int((from + t - 1) / t)
	b := min(len(e.series), int((to+t-1)/t))
	return a, max(a, b)
}

// inBand reports whether limit v is in the convergence band of a segment.
// The band's half-width is Band × the optimum, but at least one (an integer
// limit cannot come closer). When the segment is overloaded the band is
// optimum ± that; when it is not, it has no upper end, since a limit above
// the optimum does not bind below capacity.
func (e *engine) inBand(v int32, opt, load float64) bool {
	x, w := float64(v), math.Max(e.sc.Band*opt, 1)
	if x < opt-w {
		return false
	}
	return load < 1 || x <= opt+w
}

// limitFigures fills the limit's figures of a segment.
func (e *engine) limitFigures(seg *Segment, start, end int64) {
	sc := &e.sc
	opt, load := seg.Optimum, seg.Load
	// Steady part: mean, CV, in-band fraction.
	a, b := e.ticksOf(max(start+int64(sc.Settle), int64(sc.Warmup)), end)
	if b-a >= 2 {
		var s, s2 float64
		in := 0
		for _, v := range e.series[a:b] {
			x := float64(v)
			s += x
			s2 += x * x
			if e.inBand(v, opt, load) {
				in++
			}
		}
		n := float64(b - a)
		mean := s / n
		seg.MeanLimit = Num(mean)
		seg.CV = Num(math.Sqrt(math.Max(0, s2/n-mean*mean)) / mean)
		seg.InBand = Num(float64(in) / n)
	}
	// Convergence, from the segment's start.
	a, b = e.ticksOf(start, end)
	if b-a < 1 {
		return
	}
	in := make([]int, b-a+1) // prefix sums of in-band ticks
	lastOut := -1
	for i, v := range e.series[a:b] {
		in[i+1] = in[i]
		if e.inBand(v, opt, load) {
			in[i+1]++
		} else {
			lastOut = i
		}
	}
	tick := sc.Tick.Seconds()
	conv := func(k int) Num {
		if k >= b-a {
			return Num(math.Inf(1))
		}
		return Num(float64(k) * tick)
	}
	seg.ConvStrict = conv(lastOut + 1)
	half := int(sc.ConvWindow / sc.Tick / 2)
	k := 0
	for i := b - a - 1; i >= 0; i-- {
		lo, hi := max(0, i-half), min(b-a, i+half+1)
		if 2*(in[hi]-in[lo]) < hi-lo {
			k = i + 1
			break
		}
	}
	seg.Conv = conv(k)
}

// drift returns the drift of the limit over the segment that starts at
// start and runs to the end.
func (e *engine) drift(start int64, opt float64) Num {
	a, b := e.ticksOf(max(start+int64(e.sc.Settle), int64(e.sc.Warmup)), int64(e.sc.Duration))
	w := (b - a) / 10
	if w < 1 || opt <= 0 {
		return Num(math.NaN())
	}
	mean := func(xs []int32) float64 {
		s := 0.0
		for _, v := range xs {
			s += float64(v)
		}
		return s / float64(len(xs))
	}
	return Num((mean(e.series[b-w:b]) - mean(e.series[a+w:a+2*w])) / opt)
}
