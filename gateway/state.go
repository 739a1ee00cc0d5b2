package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"reflect"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/ratelimit"
)

// state is one applied configuration: everything a request needs, built up
// front and never changed; Apply replaces it whole.
type state struct {
	cfg     *config.Config
	routes  []*route
	pools   map[string]*pool
	trusted trustedProxies
	store   *store
	// tls is the TLS listener's handshake configuration, with the
	// certificates read for this state; nil without a TLS listener.
	tls     *tls.Config
	tracer  *tracing.Provider // nil when tracing is off
	version uint64
}

// route returns the first route that matches req, or nil. It returns nil
// and the reason to refuse req with when the routes cannot tell which
// route it is for: reasonAmbiguousHeader when a route cannot tell whether
// it matches (see matcher.matches), reasonAmbiguousPath when the path as
// another server reads it would choose another route: without its
// segment parameters (see withoutParams), with its backslashes as
// slashes (see withSlashes), or both, its parameters first (see
// withoutParamsThenSlashes). The reason is "" otherwise.
func (s *state) route(req request) (*route, string) {
	rt, ambiguous := s.firstRoute(req)
	if ambiguous {
		return nil, reasonAmbiguousHeader
	}
	p := req.Path()
	marks := pathMarks(p)
	for _, o := range otherReadings {
		if marks&o.marks != o.marks {
			continue
		}
		other, ambiguous := s.firstRoute(paramless{req, o.read(p)})
		switch {
		case ambiguous:
			return nil, reasonAmbiguousHeader
		case other != rt:
			return nil, reasonAmbiguousPath
		}
	}
	return rt, ""
}

// firstRoute returns the first route that matches req, or nil, and
// whether a route could not tell (see matcher.matches).
func (s *state) firstRoute(req request) (*route, bool) {
	for _, r := range s.routes {
		switch ok, ambiguous := r.match.matches(req); {
		case ambiguous:
			return nil, true
		case ok:
			return r, false
		}
	}
	return nil, false
}

// buildState builds cfg, reusing from old (which may be nil) every pool,
// store and policy whose configuration did not change, so that their state
// (connections, health, breaker windows, buckets, limits) carries over.
func buildState(cfg *config.Config, old *state, g *Gateway) (*state, error) {
	st := &state{cfg: cfg, pools: map[string]*pool{}, trusted: parseTrusted(cfg.TrustedProxies)}
	var err error
	if st.tls, err = serverTLS(cfg.TLS); err != nil {
		return nil, err
	}
	clientTLS := make(map[string]*tls.Config, len(cfg.Upstreams))
	var errs []error
	for name, ucfg := range cfg.Upstreams {
		if clientTLS[name], err = upstream.ClientTLS(name, ucfg); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if st.tracer, err = buildTracer(cfg.Tracing, old, g); err != nil {
		return nil, err
	}
	if old != nil && reflect.DeepEqual(old.cfg.Store, cfg.Store) {
		st.store = old.store
	} else if st.store, err = newStore(cfg.Store, g); err != nil {
		if old == nil || st.tracer != old.tracer {
			st.tracer.Close()
		}
		return nil, err
	}
	for name, ucfg := range cfg.Upstreams {
		if old != nil {
			if p := old.pools[name]; p != nil && reflect.DeepEqual(p.Config(), ucfg) && upstream.SameClientTLS(p.TLS(), clientTLS[name]) {
				st.pools[name] = p
				continue
			}
		}
		p, err := newPool(name, ucfg, clientTLS[name], g)
		if err != nil {
			st.close(old)
			forgetRemoved(st, old)
			return nil, err
		}
		st.pools[name] = p
	}
	var oldRoutes map[string]*route
	if old != nil {
		oldRoutes = make(map[string]*route, len(old.routes))
		for _, r := range old.routes {
			oldRoutes[r.name] = r
		}
	}
	for _, rc := range cfg.Routes {
		r, err := buildRoute(rc, st, oldRoutes[rc.Name], g)
		if err != nil {
			st.close(old)
			forgetRemoved(st, old)
			return nil, fmt.Errorf("route %q: %w", rc.Name, err)
		}
		st.routes = append(st.routes, r)
	}
	for _, p := range st.pools {
		p.Start()
	}
	return st, nil
}

// close stops what s has that other does not share: after a reload other
// is the next state, after a failed build the old one, at shutdown nil.
func (s *state) close(other *state) {
	for name, p := range s.pools {
		if other == nil || other.pools[name] != p {
			p.stop()
		}
	}
	if other == nil || other.store != s.store {
		s.store.close()
	}
	if s.tracer != nil && (other == nil || other.tracer != s.tracer) {
		s.tracer.Close() // exports what it holds; spans of requests still in flight on it are lost
	}
}

// store is where a state's rate limits keep their keys.
type store struct {
	ratelimit.Store
	closeFn func()
}

func (s *store) close() {
	if s != nil && s.closeFn != nil {
		s.closeFn()
	}
}
