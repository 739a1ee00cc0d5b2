package gateway

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/clock"
)

// The dashboard's sampling and its bounds.
const (
	// dashInterval is the time between two samples while someone watches.
	dashInterval = time.Second
	// dashIdleInterval is the time between two samples while nobody
	// watches: they only add to the history.
	dashIdleInterval = 5 * time.Second
	// dashHistory is how many samples the history keeps: five minutes
	// while someone watches, up to 25 before.
	dashHistory = 300
	// dashMaxViewers is how many event streams may be open at once.
	dashMaxViewers = 16
	// dashViewerBuffer is how many samples wait for a viewer that reads
	// slowly; the samples it has no room for are skipped.
	dashViewerBuffer = 4
)

// dashboard samples the gateway for the charts' history and the viewers
// of its event stream. One sampler runs from start until the gateway shuts
// down, on the gateway's clock, with no goroutine of its own between two
// samples (each is a timer's function): every dashIdleInterval while
// nobody watches, at once when the first viewer comes, then every
// dashInterval while one watches. Each sample watched is encoded once and
// sent to every viewer as it is.
type dashboard struct {
	g       *Gateway
	metrics prometheus.Gatherer // may be nil: no rates

	sampling sync.Mutex // serialises samples; protects prev, prevAt and havePrev
	prev     counters   // the counters of the previous sample
	prevAt   int64      // and when it read them (clock.Nanotime)
	havePrev bool

	mu      sync.Mutex // protects the fields below
	viewers map[*viewer]struct{}
	// gen numbers the sample due next: a timer whose sample is no longer
	// due (a viewer came and sampled at once) finds it changed.
	gen     uint64
	timer   clock.Timer // the next sample's; nil before start
	stopped bool        // the gateway shut down: no more samples
	history history
	last    []byte // the last sample, encoded; nil when nobody watched it
}

// viewer is one open event stream. The sampler closes frames when the
// gateway shuts down, which ends the stream.
type viewer struct {
	frames chan []byte
}

func newDashboard(g *Gateway, metrics prometheus.Gatherer) *dashboard {
	return &dashboard{g: g, metrics: metrics, viewers: map[*viewer]struct{}{}}
}

// start takes the first sample, which begins the history; the sampler
// runs from then on until the gateway shuts down.
func (d *dashboard) start() {
	d.mu.Lock()
	gen := d.gen
	d.mu.Unlock()
	d.sample(gen)
}

// join adds a viewer, and takes a sample at once for the first one. It
// returns the viewer, the history oldest first and the last sample (nil
// when there is none: the viewer's first sample comes at once); ok is
// false when the gateway is shutting down or dashMaxViewers watch
// already.
func (d *dashboard) join() (v *viewer, history []DashboardPoint, last []byte, ok bool) {
	d.mu.Lock()
	if d.g.closing.Load() || d.stopped || len(d.viewers) >= dashMaxViewers {
		d.mu.Unlock()
		return nil, nil, nil, false
	}
	v = &viewer{frames: make(chan []byte, dashViewerBuffer)}
	d.viewers[v] = struct{}{}
	history, last = d.history.points(), d.last
	first := len(d.viewers) == 1
	if first {
		// The idle sampler's next sample is too far off: one now, and the
		// sampler goes on every dashInterval.
		if d.timer != nil {
			d.timer.Stop()
		}
		d.gen++
	}
	gen := d.gen
	d.mu.Unlock()
	if first {
		d.sample(gen)
	}
	return v, history, last, true
}

// leave removes a viewer; after the last one, the sampler goes on every
// dashIdleInterval.
func (d *dashboard) leave(v *viewer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.viewers, v) // nothing when removed at shutdown
	if len(d.viewers) == 0 {
		d.last = nil // stale by the time another viewer comes
	}
}

// sample takes sample gen, unless another is due by now: it reads the
// counters (rates need two readings: the first sample has none), adds the
// sample's point to the history and, while someone watches, the sample
// to their streams; then it sets the timer of the next.
func (d *dashboard) sample(gen uint64) {
	d.sampling.Lock()
	defer d.sampling.Unlock()
	d.mu.Lock()
	due, watched := d.gen == gen && !d.stopped, len(d.viewers) > 0
	d.mu.Unlock()
	if !due {
		return
	}
	cur, err := readCounters(d.metrics)
	now := d.g.clock.Nanotime()
	var r map[string]*RouteRates
	if d.havePrev && err == nil && now > d.prevAt {
		r = rates(d.prev, cur, float64(now-d.prevAt)/float64(time.Second))
	}
	d.prev, d.havePrev, d.prevAt = cur, err == nil && d.metrics != nil, now
	f := d.frame(r)
	var b []byte
	if watched {
		if b, err = json.Marshal(f); err != nil {
			b = nil // a sample that cannot be encoded is not sent
		}
	}
	d.publish(gen, f.Point, b)
}

// publish adds point, of sample gen, to the history and sends b, the
// sample encoded (nil: none), to every viewer, then sets the timer of the
// next sample. Once the gateway shuts down it ends every stream instead,
// and the sampler stops.
func (d *dashboard) publish(gen uint64, point DashboardPoint, b []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen != gen || d.stopped {
		return // a viewer came meanwhile: its sample replaces this one
	}
	if d.g.closing.Load() {
		for v := range d.viewers {
			close(v.frames)
			delete(d.viewers, v)
		}
		d.stopped, d.last = true, nil
		return
	}
	d.history.add(point)
	if b != nil {
		d.last = b
		for v := range d.viewers {
			select {
			case v.frames <- b:
			default: // a slow viewer skips this sample
			}
		}
	}
	interval := dashIdleInterval
	if len(d.viewers) > 0 {
		interval = dashInterval
	}
	d.gen++
	next := d.gen
	d.timer = d.g.clock.AfterFunc(interval, func() { d.sample(next) })
}

// frame builds a sample of the gateway's state with rates r (nil: none).
func (d *dashboard) frame(r map[string]*RouteRates) *DashboardFrame {
	now := d.g.clock.Now()
	f := &DashboardFrame{Time: now, Status: d.g.Status(), Rates: r,
		Point: DashboardPoint{Time: now.UnixMilli(), Routes: map[string]RoutePoint{}}}
	for _, rs := range f.Routes {
		if log := d.g.breakerLog.last(rs.Name); log != nil {
			if f.Transitions == nil {
				f.Transitions = map[string][]Transition{}
			}
			f.Transitions[rs.Name] = log
		}
		p := RoutePoint{Limit: rs.ConcurrencyLimit, InFlight: rs.InFlight}
		if rs.ConcurrencyLimit > 0 {
			p.InFlight = int64(rs.ConcurrencyInFlight)
		}
		if rr := r[rs.Name]; rr != nil {
			for class, n := range rr.Requests {
				if class == "served" {
					p.Served += n
				} else {
					p.Refused += n
				}
			}
		}
		f.Point.Routes[rs.Name] = p
	}
	for _, us := range f.Upstreams {
		for _, ts := range us.Targets {
			if log := d.g.targetLog.last(targetKey{us.Name, ts.URL}); log != nil {
				if f.TargetTransitions == nil {
					f.TargetTransitions = map[string]map[string][]Transition{}
				}
				if f.TargetTransitions[us.Name] == nil {
					f.TargetTransitions[us.Name] = map[string][]Transition{}
				}
				f.TargetTransitions[us.Name][ts.URL] = log
			}
		}
	}
	return f
}
