package gateway

import (
	"time"

	"github.com/valyala/fasthttp"
)

// start begins active health checks, if the pool has them. It is safe to
// call more than once.
func (p *pool) start() {
	if p.cfg.Health == nil {
		return
	}
	p.once.Do(func() { go p.checkLoop() })
}

// stop ends the health checks and closes the idle HTTP/2 connections (the
// upstream's and gRPC calls'). It is safe to call more than once.
func (p *pool) stop() {
	p.stopOnce.Do(func() {
		close(p.done)
		if p.h2 != nil {
			p.h2.CloseIdleConnections()
		}
		p.closeGRPC()
	})
}

// checkLoop checks every target once per interval until stop.
func (p *pool) checkLoop() {
	h := p.cfg.Health
	for {
		for _, t := range p.targets {
			ok := p.check(t, h.Path, h.Timeout.D())
			if was := t.healthy.Swap(ok); was != ok {
				p.log.Warn("target health changed", "upstream", p.name, "target", t.url, "healthy", ok)
			}
		}
		tm := p.clock.NewTimer(h.Interval.D())
		select {
		case <-p.done:
			tm.Stop()
			return
		case <-tm.C():
		}
	}
}

// check asks t for path: a 2xx or 3xx answer within timeout is healthy.
func (p *pool) check(t *target, path string, timeout time.Duration) bool {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer releaseResponse(resp)
	req.SetRequestURI(path)
	req.Header.SetHost(t.client.Addr)
	req.Header.SetMethod(fasthttp.MethodGet)
	dl := time.Now().Add(timeout)
	if err := t.roundTrip(req, resp, trip{head: dl, deadline: dl}); err != nil {
		return false
	}
	return resp.StatusCode() >= 200 && resp.StatusCode() < 400
}
