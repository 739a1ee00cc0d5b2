package gateway

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	grpccodes "google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
)

// routePolicies are the policy instances of a route, with the settings they
// were built from: a reload reuses every instance whose settings did not
// change, so breaker windows, budgets and adaptive limits carry over.
type routePolicies struct {
	rateCfg    *config.RateLimit
	rate       *rateLimit
	rateStore  *store // the store rate was built on
	retryCfg   *config.Retry
	retry      *retry.Retry
	breakerCfg *config.CircuitBreaker
	breaker    *breaker.Breaker
	concCfg    *config.Concurrency
	shares     []concurrency.Share // the priority classes' shares the adaptive limit was built with
	bulkhead   *concurrency.Bulkhead
	adaptive   *concurrency.Limiter
	timeout    time.Duration
	group      *coalesce.Group[string, *sharedResponse]
	prio       *priorities // nil without priority classes
	flow       *flowPolicies
}

// buildRoute builds a route of st from its configuration, reusing old's
// policies (old may be nil) where their settings are unchanged.
func buildRoute(rc *config.Route, st *state, old *route, g *Gateway) (*route, error) {
	r := &route{name: rc.Name, cfg: rc, match: newMatcher(rc.Match), pool: st.pools[rc.Upstream],
		grpc: newGRPCMethods(rc.GRPC)}
	var prev *routePolicies
	if old != nil {
		prev = old.policies
	}
	p, err := buildPolicies(rc.Name, &rc.Policies, prev, st, g)
	if err != nil {
		return nil, err
	}
	if p.flow.lastGood != nil && old != nil && !sameSource(old, rc, r.pool) {
		// p.flow is the new route's own: its answers start afresh.
		p.flow.lastGood = newLastGood(p.flow.lastGoodCfg, g.clock)
	}
	r.metrics = g.metrics.Route(rc.Name) // once built: its series exist from now on
	r.policies = p
	r.life = newLifecycle(p, r.pool, rc.Policies.Fallback, g.clock)
	r.rules = newRouteRules(rc)
	r.loop = loopRoute(rc, st, r.pool)
	return r, nil
}

// loopRoute reports whether event loops can serve the route: none of its
// policies waits for another request (no coalescing, no concurrency queue)
// or for a store (no rate limit on Redis), and its targets speak plain
// HTTP/1.1. (A retry's wait is a timer on the loop.) Nor does it hedge or
// fall back beyond a static answer (see loopFlow).
func loopRoute(rc *config.Route, st *state, p *pool) bool {
	pc := &rc.Policies
	if pc.Coalesce || p.H2() != nil || (pc.Concurrency != nil && pc.Concurrency.Queue > 0) ||
		(pc.RateLimit != nil && st.cfg.Store.Kind == "redis") || !loopFlow(pc) {
		return false
	}
	for _, t := range p.Targets() {
		if t.Client.IsTLS {
			return false
		}
	}
	return true
}

func buildPolicies(name string, pc *config.Policies, prev *routePolicies, st *state, g *Gateway) (*routePolicies, error) {
	if prev == nil {
		prev = &routePolicies{}
	}
	p := &routePolicies{timeout: pc.Timeout.D(), prio: newPriorities(pc.Priority)}
	var err error
	if rl := pc.RateLimit; rl != nil {
		p.rateCfg = rl
		if p.rate, err = buildRateLimit(name, rl, prev, st); err != nil {
			return nil, err
		}
		p.rateStore = st.store
	}
	if rc := pc.Retry; rc != nil {
		p.retryCfg = rc
		if prev.retry != nil && reflect.DeepEqual(prev.retryCfg, rc) {
			p.retry = prev.retry
		} else if p.retry, err = buildRetry(name, rc, g); err != nil {
			return nil, err
		}
	}
	if bc := pc.CircuitBreaker; bc != nil {
		p.breakerCfg = bc
		if prev.breaker != nil && reflect.DeepEqual(prev.breakerCfg, bc) {
			p.breaker = prev.breaker
		} else if p.breaker, err = buildBreaker(name, bc, g); err != nil {
			return nil, err
		}
	}
	if cc := pc.Concurrency; cc != nil {
		p.concCfg, p.shares = cc, shares(pc.Priority)
		if reflect.DeepEqual(prev.concCfg, cc) && reflect.DeepEqual(prev.shares, p.shares) {
			p.bulkhead, p.adaptive = prev.bulkhead, prev.adaptive
		} else if err = buildConcurrency(name, cc, p, g); err != nil {
			return nil, err
		}
	}
	if p.flow, err = buildFlow(pc, prev.flow, st, g); err != nil {
		return nil, err
	}
	if pc.Coalesce {
		p.group = prev.group
		if p.group == nil {
			p.group = &coalesce.Group[string, *sharedResponse]{}
		}
	}
	return p, nil
}

func buildRateLimit(name string, rl *config.RateLimit, prev *routePolicies, st *state) (*rateLimit, error) {
	lim := ratelimit.Limit{Algorithm: ratelimit.Algorithm(rl.Algorithm), Limit: rl.Limit, Period: rl.Period.D(), Burst: rl.Burst}
	r := &rateLimit{policy: policyHeader(name, lim), onError: st.cfg.Store.Redis.OnError, byRoute: rl.Key.Kind == config.SourceRoute, v6bits: rl.IPv6Prefix}
	if h := rl.Key.Header; h != "" {
		r.header, r.names, r.one = h, http1.CGINames(h), http1.OneValue([]byte(h))
	}
	if pr := prev.rate; pr != nil && pr.limiter != nil && prev.rateStore == st.store {
		// Same store: keep the keys' state and change only the limit.
		if err := pr.limiter.SetLimit(lim); err != nil {
			return nil, err
		}
		r.limiter = pr.limiter
		return r, nil
	}
	l, err := ratelimit.New(ratelimit.Options{Name: name, Limit: lim, Store: st.store})
	if err != nil {
		return nil, err
	}
	r.limiter = l
	return r, nil
}

func buildRetry(name string, rc *config.Retry, g *Gateway) (*retry.Retry, error) {
	budget, err := retry.NewBudget(retry.BudgetOptions{Ratio: rc.Budget, Clock: g.clock})
	if err != nil {
		return nil, err
	}
	on := retryOn(rc.On)
	return retry.New(retry.Options{
		MaxAttempts: rc.Attempts,
		Initial:     rc.Backoff.Initial.D(),
		Max:         rc.Backoff.Max.D(),
		Jitter:      rc.Backoff.Jitter,
		Budget:      budget,
		Clock:       g.clock,
		RetryIf:     on,
	})
}

// retryOn returns the retry predicate for a route's retry.on list. A request
// that cannot be sent twice (its body was streamed, or its method is not
// idempotent and the upstream may have seen it) is never retried: its
// attempt's error is final.
func retryOn(on []config.RetryOn) func(sluice.Result) bool {
	connect, timeouts := slices.Contains(on, config.RetryConnectError), slices.Contains(on, config.RetryTimeout)
	codes := map[int]bool{}
	for _, o := range on {
		if c := o.Status(); c != 0 {
			codes[c] = true
		}
	}
	return func(r sluice.Result) bool {
		if r.Err == nil || r.Class == sluice.Ignored {
			return false
		}
		var ue *UpstreamError
		var se *StatusError
		var fe *finalError
		var ge *answer.GRPCStatusError
		switch {
		case errors.As(r.Err, &fe):
			return false
		case errors.As(r.Err, &ge):
			return ge.Code == grpccodes.Unavailable // gRPC's own guidance
		case errors.As(r.Err, &ue) && ue.Connect:
			return connect
		case errors.Is(r.Err, sluice.ErrTimeout):
			return timeouts
		case errors.As(r.Err, &se):
			return codes[se.StatusCode]
		}
		return false
	}
}

// finalError marks an attempt's error as one a retry must not repeat.
type finalError struct{ err error }

func (e *finalError) Error() string { return e.err.Error() }
func (e *finalError) Unwrap() error { return e.err }

func buildBreaker(name string, bc *config.CircuitBreaker, g *Gateway) (*breaker.Breaker, error) {
	o := breaker.Options{
		Name:                name,
		Clock:               g.clock,
		FailureRate:         bc.FailureRate,
		ConsecutiveFailures: bc.ConsecutiveFailures,
		MinCalls:            bc.MinCalls,
		OpenDuration:        bc.OpenFor.D(),
		HalfOpenCalls:       bc.HalfOpenCalls,
		OnStateChange: func(n string, from, to breaker.State) {
			g.metrics.BreakerTransition(n, to)
			g.breakerLog.record(n, from, to, g.clock.Now())
			g.log.Warn("circuit breaker state changed", "breaker", n, "from", from.String(), "to", to.String())
		},
	}
	if s := bc.SlowCall; s != nil {
		o.SlowCallThreshold, o.SlowCallRate = s.Threshold.D(), s.Rate
	}
	o.TimeWindow, o.CountWindow = bc.Window.Span.D(), bc.Window.Calls
	b, err := breaker.New(o)
	if err != nil {
		return nil, fmt.Errorf("circuit_breaker: %w", err)
	}
	return b, nil
}

func buildConcurrency(name string, cc *config.Concurrency, p *routePolicies, g *Gateway) error {
	if cc.Adaptive == nil {
		b, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{Name: name, MaxConcurrent: cc.Max, MaxQueue: cc.Queue, MaxWait: cc.MaxWait.D(), Clock: g.clock})
		if err != nil {
			return fmt.Errorf("concurrency: %w", err)
		}
		p.bulkhead = b
		return nil
	}
	alg, err := newAlgorithm(cc.Adaptive)
	if err != nil {
		return fmt.Errorf("concurrency.adaptive: %w", err)
	}
	l, err := concurrency.NewLimiter(concurrency.LimiterOptions{
		Name:       name,
		Algorithm:  alg,
		MaxQueue:   cc.Queue,
		MaxWait:    cc.MaxWait.D(),
		Priorities: p.shares,
		Clock:      g.clock,
	})
	if err != nil {
		return fmt.Errorf("concurrency.adaptive: %w", err)
	}
	p.adaptive = l
	return nil
}
