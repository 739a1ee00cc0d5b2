package upstream

import (
	"time"

	"github.com/valyala/fasthttp"
)

// checkLoop checks every target once per interval until Stop, and logs
// each change of a target's verdict.
func (p *Pool) checkLoop() {
	h := p.cfg.Health
	for {
		for _, t := range p.targets {
			ok := check(t, h.Path, h.Timeout.D())
			if was := t.healthy.Swap(ok); was != ok {
				p.log.Warn("target health changed", "upstream", p.name, "target", t.URL, "healthy", ok)
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
func check(t *Target, path string, timeout time.Duration) bool {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer releaseResponse(resp)
	req.SetRequestURI(path)
	req.Header.SetHost(t.Client.Addr)
	req.Header.SetMethod(fasthttp.MethodGet)
	dl := time.Now().Add(timeout)
	if err := t.RoundTrip(req, resp, Trip{Head: dl, Deadline: dl}); err != nil {
		return false
	}
	return resp.StatusCode() >= 200 && resp.StatusCode() < 400
}

// releaseResponse closes resp's streamed body, if it has one, and gives
// resp back to fasthttp's pool.
func releaseResponse(resp *fasthttp.Response) {
	_ = resp.CloseBodyStream()
	fasthttp.ReleaseResponse(resp)
}
