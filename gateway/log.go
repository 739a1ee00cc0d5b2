package gateway

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
)

// NewLogger returns the logger the configuration asks for, writing to w
// (standard error when w is nil).
func NewLogger(c config.Log, w io.Writer) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// logRequest writes the request's one log line, "request", at info, with
// the same fields in text and JSON, on every engine:
//
//   - route: the route's name ("" when none matched); method, path;
//   - status: the status code sent; outcome: "ok" when the upstream's
//     answer went out, else the reason the gateway answered itself;
//   - request_id: the client's X-Request-Id when well formed, else the one
//     the gateway made (both sent upstream);
//   - target: the last attempt's target, a hedged race's winner's (""
//     when none was tried);
//     attempts: the number of attempts;
//   - bytes_in, bytes_out: the sizes of the request and response bodies;
//     a body streamed from a target counts the bytes the client's
//     connection took (see upstream.BodyEnd.Took), fewer than its length when the
//     client left early;
//   - duration: the seconds the request took (as the request duration
//     metric measures it), a number;
//   - remote: the client connection's address;
//   - trace_id: the request's trace, when it was sampled (only then).
//
// Requests served by the upstream with a status below 500 are sampled
// (log.sample); every other request is logged.
func (g *Gateway) logRequest(ctx *fasthttp.RequestCtx, route string, code int, reason string, d time.Duration, o *observation) {
	if !g.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	if reason == "" && code < 500 {
		if s := g.state.Load().cfg.Log.Sample; s < 1 && rand.Float64() >= s {
			return
		}
	}
	target := ""
	if o.target != nil {
		target = o.target.URL
	}
	remote := o.remote
	if remote == nil {
		remote = ctx.RemoteAddr()
	}
	attrs := [...]slog.Attr{
		slog.String("route", route),
		slog.String("method", string(ctx.Method())),
		slog.String("path", string(ctx.Path())),
		slog.Int("status", code),
		slog.String("outcome", outcomeName(reason)),
		slog.String("request_id", string(o.id)),
		slog.String("target", target),
		slog.Int("attempts", o.attempts),
		slog.Int64("bytes_in", o.bytesIn),
		slog.Int64("bytes_out", o.bytesOut),
		slog.Float64("duration", d.Seconds()),
		slog.String("remote", remote.String()),
		{},
	}
	n := len(attrs) - 1
	if id := o.trace.TraceID(); id != "" {
		attrs[n], n = slog.String("trace_id", id), n+1
	}
	g.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs[:n]...)
}

func outcomeName(reason string) string {
	if reason == "" {
		return "ok"
	}
	return reason
}
