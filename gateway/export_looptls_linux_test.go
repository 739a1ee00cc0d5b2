package gateway

import (
	"context"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// LoopTLSConns returns how many connections of g's TLS listeners its
// event loops took, or 0 when no loops run.
func LoopTLSConns(g *Gateway) uint64 {
	e := loopEngineOf(g)
	if e == nil {
		return 0
	}
	return e.tlsConns.Load()
}

// LoopHandovers returns how many connections g's event loops handed to
// another engine, or 0 when no loops run.
func LoopHandovers(g *Gateway) uint64 {
	e := loopEngineOf(g)
	if e == nil {
		return 0
	}
	return e.handovers.Load()
}

// LoopTLSOutbound returns how many TLS connections g's event loops serve
// and the encrypted bytes they hold for them, not sent yet; it looks on
// each loop, within limit.
func LoopTLSOutbound(g *Gateway, limit time.Duration) (conns, out int, ok bool) {
	e := loopEngineOf(g)
	if e == nil {
		return 0, 0, true
	}
	loops := e.loopList()
	type count struct{ conns, out int }
	res := make(chan count, len(loops))
	for _, l := range loops {
		_ = l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			var c count
			for cc := range l.conns {
				if cc.tls != nil {
					c.conns++
					c.out += cc.c.OutboundBuffered()
				}
			}
			res <- c
			return nil
		}))
	}
	timeout := time.After(limit)
	for range loops {
		select {
		case c := <-res:
			conns, out = conns+c.conns, out+c.out
		case <-timeout:
			return 0, 0, false
		}
	}
	return conns, out, true
}
