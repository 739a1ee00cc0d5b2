package gateway

// history is the dashboard's record of its last dashHistory samples, for
// the charts: their times in one ring, and each route's points in a ring
// of its own, at the same places. A route's ring is made when a sample
// first has the route and freed when a sample no longer has it (a reload
// removed it): memory is bounded by the routes configured now. The zero
// value is an empty history; it is not safe for concurrent use.
type history struct {
	n      uint64 // the samples ever added; the next goes at n % dashHistory
	times  [dashHistory]int64
	routes map[string]*routeHistory
}

// routeHistory is one route's points: from its first sample, number
// first, on.
type routeHistory struct {
	first  uint64
	points [dashHistory]RoutePoint
}

// add records a sample's point.
func (h *history) add(p DashboardPoint) {
	if h.routes == nil {
		h.routes = map[string]*routeHistory{}
	}
	at := h.n % dashHistory
	h.times[at] = p.Time
	for name, rp := range p.Routes {
		r := h.routes[name]
		if r == nil {
			r = &routeHistory{first: h.n}
			h.routes[name] = r
		}
		r.points[at] = rp
	}
	for name := range h.routes {
		if _, ok := p.Routes[name]; !ok {
			delete(h.routes, name)
		}
	}
	h.n++
}

// points returns the history, oldest first: each sample's point with the
// routes that have a point in it.
func (h *history) points() []DashboardPoint {
	from := h.n - min(h.n, dashHistory)
	out := make([]DashboardPoint, 0, h.n-from)
	for i := from; i < h.n; i++ {
		p := DashboardPoint{Time: h.times[i%dashHistory], Routes: make(map[string]RoutePoint, len(h.routes))}
		for name, r := range h.routes {
			if r.first <= i {
				p.Routes[name] = r.points[i%dashHistory]
			}
		}
		out = append(out, p)
	}
	return out
}
