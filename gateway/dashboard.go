package gateway

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The dashboard's sampling and its bounds.
const (
	// dashInterval is the time between two samples.
	dashInterval = time.Second
	// dashHistory is how many samples the history keeps: five minutes.
	dashHistory = 300
	// dashMaxViewers is how many event streams may be open at once.
	dashMaxViewers = 16
	// dashViewerBuffer is how many samples wait for a viewer that reads
	// slowly; the samples it has no room for are skipped.
	dashViewerBuffer = 4
)

// dashboard samples the gateway for the viewers of its event stream: one
// sampler serves every viewer, and it runs only while one watches. Each
// sample is encoded once and sent to every viewer as it is. The history of
// the charts is a ring of the last dashHistory samples' points, kept across
// viewers (with a gap for the time nobody watched).
type dashboard struct {
	g       *Gateway
	metrics prometheus.Gatherer // may be nil: no rates

	mu      sync.Mutex // protects the fields below
	viewers map[*viewer]struct{}
	// stop ends the running sampler; nil when none runs. A sampler
	// publishes only while stop is still its own, so one that is ending
	// never adds to the history of the one that replaced it.
	stop    chan struct{}
	history []DashboardPoint // a ring: next is where the next point goes
	next    int
	last    []byte // the last sample, encoded
}

// viewer is one open event stream. The sampler closes frames when the
// gateway shuts down, which ends the stream.
type viewer struct {
	frames chan []byte
}

func newDashboard(g *Gateway, metrics prometheus.Gatherer) *dashboard {
	return &dashboard{g: g, metrics: metrics, viewers: map[*viewer]struct{}{}}
}

// join adds a viewer, starting the sampler for the first one. It returns
// the viewer, the history oldest first and the last sample (nil before the
// first); ok is false when the gateway is shutting down or dashMaxViewers
// watch already.
func (d *dashboard) join() (v *viewer, history []DashboardPoint, last []byte, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.g.closing.Load() || len(d.viewers) >= dashMaxViewers {
		return nil, nil, nil, false
	}
	v = &viewer{frames: make(chan []byte, dashViewerBuffer)}
	d.viewers[v] = struct{}{}
	if d.stop == nil {
		d.stop, d.last = make(chan struct{}), nil // the last sample is stale
		go d.sample(d.stop)
	}
	history = make([]DashboardPoint, 0, len(d.history))
	history = append(append(history, d.history[d.next:]...), d.history[:d.next]...)
	return v, history, d.last, true
}

// leave removes a viewer, stopping the sampler after the last one.
func (d *dashboard) leave(v *viewer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.viewers[v]; !ok {
		return // removed at shutdown
	}
	delete(d.viewers, v)
	if len(d.viewers) == 0 && d.stop != nil {
		close(d.stop)
		d.stop = nil
	}
}

// sample is the sampler: a sample at once, then one every dashInterval on
// the gateway's clock until stop is closed or the gateway shuts down. The
// first sample has no rates: they need two readings of the counters. The
// timer of the next sample is set before a sample is published, so that
// the sample's viewers know it is waiting (tests advance a fake clock then).
func (d *dashboard) sample(stop chan struct{}) {
	clk := d.g.clock
	prev, err := readCounters(d.metrics)
	havePrev, prevAt := err == nil && d.metrics != nil, clk.Nanotime()
	var r map[string]*RouteRates
	for {
		t := clk.NewTimer(dashInterval)
		if !d.publish(stop, d.frame(r)) {
			t.Stop()
			return
		}
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C():
		}
		cur, err := readCounters(d.metrics)
		now := clk.Nanotime()
		r = nil
		if havePrev && err == nil && now > prevAt {
			r = rates(prev, cur, float64(now-prevAt)/float64(time.Second))
		}
		prev, havePrev, prevAt = cur, err == nil && d.metrics != nil, now
	}
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
	return f
}

// publish adds f to the history and sends it to every viewer. It reports
// whether the sampler of stop should go on: not once another sampler
// replaced it, nor once the gateway shuts down, which ends every stream.
func (d *dashboard) publish(stop chan struct{}, f *DashboardFrame) bool {
	b, err := json.Marshal(f)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stop != stop {
		return false
	}
	if d.g.closing.Load() {
		for v := range d.viewers {
			close(v.frames)
			delete(d.viewers, v)
		}
		d.stop = nil
		return false
	}
	if err != nil {
		return true // a sample that cannot be encoded is skipped
	}
	if len(d.history) < dashHistory {
		d.history = append(d.history, f.Point)
	} else {
		d.history[d.next] = f.Point
		d.next = (d.next + 1) % dashHistory
	}
	d.last = b
	for v := range d.viewers {
		select {
		case v.frames <- b:
		default: // a slow viewer skips this sample
		}
	}
	return true
}
