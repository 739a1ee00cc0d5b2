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

// logRequest writes the request's one log line. Requests served by the
// upstream with a status below 500 are sampled (log.sample); every other
// request is logged.
func (g *Gateway) logRequest(ctx *fasthttp.RequestCtx, route string, code int, reason string, d time.Duration) {
	if !g.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	if reason == "" && code < 500 {
		if s := g.state.Load().cfg.Log.Sample; s < 1 && rand.Float64() >= s {
			return
		}
	}
	g.log.LogAttrs(context.Background(), slog.LevelInfo, "request",
		slog.String("route", route),
		slog.String("method", string(ctx.Method())),
		slog.String("path", string(ctx.Path())),
		slog.Int("status", code),
		slog.String("outcome", outcomeName(reason)),
		slog.Duration("duration", d),
		slog.String("remote", ctx.RemoteAddr().String()),
	)
}

func outcomeName(reason string) string {
	if reason == "" {
		return "ok"
	}
	return reason
}
