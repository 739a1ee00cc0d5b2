//go:build linux

package gateway

import (
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/http1"
)

// lingerClose closes the connection after the gateway's own refusal (a
// 400 that closes, its answer sent: see lingerNext) as the goroutine
// engine does (closeAfter): the connection leaves its loop for a
// goroutine that shuts its sending side and reads and drops what the
// client still sends for the lingering time (see lingerTime), so that a
// client sending more behind the refused request reads the answer, not a
// reset.
func (cc *clientConn) lingerClose() gnet.Action {
	nc, err := cc.leave()
	if nc == nil && err == nil {
		return gnet.None // answers wait to be read
	}
	if err != nil {
		return gnet.Close
	}
	g := cc.l.e.g
	g.lingers.start(nc, nil, g.state.Load().cfg.Server.WriteTimeout.D())
	return gnet.Close
}

// refuseHead answers 400 to a request head the gateway refuses before it
// has ended (see http1.HeadScan), then closes the connection with a
// lingering close.
func (cc *clientConn) refuseHead(now time.Time) {
	reason := http1.RefusalReason(fasthttp.StatusBadRequest)
	cc.start = now
	cc.obs.begin(nil)
	writeError(&cc.ctx, fasthttp.StatusBadRequest, reason, 0)
	cc.closeNext, cc.lingerNext = true, true
	cc.end(reason)
	cc.reply()
}
