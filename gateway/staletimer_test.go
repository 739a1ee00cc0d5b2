package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/telemetry"
)

// TestLateHeadTimerDuringRetryWait has an attempt's head timer fall due as
// its 5xx arrives, so that the loop reads the 5xx before it runs the
// timer's event, on each engine: the request waits for its retry and is
// served by it, and the target's in-flight count ends at 0. (On the loops,
// the wait before the retry had the attempt's generation, so the late
// timer found it and ended the attempt a second time: its permits were
// released twice, the target's in-flight count went to -1, and the client
// got a 504 during the wait.)
//
// The event loop is held in a request log (of another request on the same
// loop: the loops take connections in turn) while the 5xx arrives and the
// timer falls due; a loop handles the I/O it finds before its queued
// events.
func TestLateHeadTimerDuringRetryWait(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		arrived, reply, sent := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		var calls atomic.Int64
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/r" {
				return // 200 at once
			}
			if calls.Add(1) == 1 {
				arrived <- struct{}{}
				select {
				case <-reply:
				case <-time.After(waitLimit):
				}
				w.WriteHeader(http.StatusBadGateway)
				w.(http.Flusher).Flush() // in the gateway's socket buffer once this returns
				close(sent)
				return
			}
			_, _ = io.WriteString(w, "retried")
		})
		fc := clock.NewFake(time.Time{})
		log := &holdingLog{path: "/block", held: make(chan struct{}, 1), release: make(chan struct{})}
		tg := startGatewayLog(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: r
    upstream: up
    match: {path_prefix: /r}
    policies:
      timeout: 1m # the loops time it on the gateway's clock, the goroutine engine on the wall clock
      retry: {attempts: 2, on: ["502"], backoff: {initial: 1h, max: 1h, jitter: none}}
  - {name: other, upstream: up}
`, engine, up.URL), fc, slog.New(log))
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()

		a, abr := dialClient(t, tg.Addr)
		for range runtime.GOMAXPROCS(0) - 1 { // the loops' count: b is on a's loop
			dialClient(t, tg.Addr)
		}
		b, bbr := dialClient(t, tg.Addr)
		if _, err := io.WriteString(a, "GET /r HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatal("the request never reached the target")
		}
		// b's request holds the loop in its log.
		if _, err := io.WriteString(b, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-log.held:
		case <-ctx.Done():
			t.Fatal("the request log was never written")
		}
		close(reply) // the 5xx is sent ...
		select {
		case <-sent:
		case <-ctx.Done():
			t.Fatal("the 5xx was never sent")
		}
		fc.Advance(time.Minute) // ... and the attempt's timer falls due
		close(log.release)
		if resp, err := http.ReadResponse(bbr, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("the other request: %v %v", resp, err)
		}
		// The wait before the retry, then the retry. (If the loop ran the
		// timer's event before it read the 5xx, which gnet does when its
		// task queue was woken in the batch the loop was held in, the
		// attempt timed out first: a 504, no retry; the in-flight count
		// must still end at 0.)
		type answer struct {
			code int
			body string
			err  error
		}
		answered := make(chan answer, 1)
		go func() {
			resp, err := http.ReadResponse(abr, nil)
			if err != nil {
				answered <- answer{err: err}
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answered <- answer{code: resp.StatusCode, body: string(body)}
		}()
		waiting := make(chan error, 1)
		go func() { waiting <- fc.BlockUntil(ctx, 1) }()
		var got answer
		select {
		case got = <-answered:
			if got.err != nil || got.code != http.StatusGatewayTimeout {
				t.Fatalf("the request before its retry: %d %q %v, want the retry or a 504 (timer first)", got.code, got.body, got.err)
			}
			cancel()
			<-waiting
		case err := <-waiting:
			if err != nil {
				t.Fatal(err)
			}
			fc.Advance(time.Hour)
			if got = <-answered; got.err != nil {
				t.Fatal(got.err)
			}
			if got.code != 200 || got.body != "retried" {
				t.Errorf("the request: %d %q, want 200 \"retried\"", got.code, got.body)
			}
		}
		for _, u := range tg.Status().Upstreams {
			for _, tgt := range u.Targets {
				if tgt.InFlight != 0 {
					t.Errorf("target %s in flight %d, want 0", tgt.URL, tgt.InFlight)
				}
			}
		}
	})
}

// holdingLog is a log handler that holds the request log of path until
// release is closed (or waitLimit passes), saying so on held.
type holdingLog struct {
	path    string
	held    chan struct{}
	release chan struct{}
}

func (h *holdingLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdingLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdingLog) WithGroup(string) slog.Handler            { return h }

func (h *holdingLog) Handle(_ context.Context, r slog.Record) error {
	hold := false
	r.Attrs(func(a slog.Attr) bool {
		hold = hold || (a.Key == "path" && a.Value.String() == h.path)
		return true
	})
	if hold {
		h.held <- struct{}{}
		select {
		case <-h.release:
		case <-time.After(waitLimit):
		}
	}
	return nil
}

// startGatewayLog is startGatewayClock with the gateway's log going to
// log.
func startGatewayLog(t testing.TB, cfg *config.Config, fc *clock.Fake, log *slog.Logger) *testGateway {
	t.Helper()
	checkLeaks(t)
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: log, Metrics: m, Clock: fc})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &testGateway{Gateway: g, Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(),
		Clock: fc, Registry: reg, served: make(chan error, 1)}
	go func() { tg.served <- g.Serve(ln) }()
	t.Cleanup(func() { tg.stop(t) })
	return tg
}
