package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
	"github.com/sluicehq/sluice/telemetry"
)

// startObserved starts a gateway for cfg whose log (in cfg's log format,
// at info) goes to the returned buffer, on a fake clock that moves on by
// itself so that waits between attempts end. A tracing receiver the test
// uses must be started before it, so that it outlives the gateway's last
// export at shutdown.
func startObserved(t *testing.T, cfg *config.Config) (*testGateway, *logBuffer) {
	t.Helper()
	return startObservedStep(t, cfg, time.Nanosecond)
}

// startObservedStep is startObserved with the fake clock moving step at a
// time whenever something waits on it; with step 0 it moves only when the
// test advances it.
func startObservedStep(t *testing.T, cfg *config.Config, step time.Duration) (*testGateway, *logBuffer) {
	t.Helper()
	checkLeaks(t)
	fc := clock.NewFake(time.Time{})
	buf := &logBuffer{}
	cfg.Log.Level = "info"
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: gateway.NewLogger(cfg.Log, buf), Metrics: m, Clock: fc})
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
	if step > 0 {
		pumpClock(t, fc, step)
	}
	return tg, buf
}

// flushTraces waits until n requests have ended (their log lines are
// written: a client may have its answer before its request has ended),
// then exports every span the gateway has ended.
func flushTraces(t *testing.T, gw *testGateway, logs *logBuffer, n int) {
	t.Helper()
	logs.requests(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := gateway.FlushTraces(ctx, gw.Gateway); err != nil {
		t.Fatal(err)
	}
}

// logBuffer collects a gateway's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// requests waits until n request lines are in the log (the gateway may
// write a line just after its response went out) and returns them, each
// as its fields, decoded from JSON or text.
func (b *logBuffer) requests(t *testing.T, n int) []map[string]any {
	t.Helper()
	var lines []map[string]any
	eventually(t, strconv.Itoa(n)+" request log lines", func() bool {
		b.mu.Lock()
		text := b.buf.String()
		b.mu.Unlock()
		lines = lines[:0]
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			if f := logFields(t, sc.Text()); f["msg"] == "request" {
				lines = append(lines, f)
			}
		}
		return len(lines) >= n
	})
	return lines
}

// logFields decodes one log line: JSON (numbers as float64), or slog's
// text (key=value, values quoted when they need it; numbers as float64
// when they parse as numbers).
func logFields(t *testing.T, line string) map[string]any {
	t.Helper()
	f := map[string]any{}
	if strings.HasPrefix(line, "{") {
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		return f
	}
	for s := line; s != ""; {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			t.Fatalf("log line %q: no key=value at %q", line, s)
		}
		key, rest := s[:eq], s[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			end := strings.IndexByte(rest, ' ')
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		if x, err := strconv.ParseFloat(val, 64); err == nil {
			f[key] = x
		} else {
			f[key] = val
		}
		s = strings.TrimPrefix(rest, " ")
	}
	return f
}

// spansBy splits spans into the server spans, by request id, and the
// client spans, by parent span id.
func spansBy(spans []tracingtest.Span) (servers map[string]tracingtest.Span, attempts map[string][]tracingtest.Span) {
	servers, attempts = map[string]tracingtest.Span{}, map[string][]tracingtest.Span{}
	for _, s := range spans {
		switch s.Kind {
		case "server":
			id, _ := s.Attrs["sluice.request_id"].(string)
			servers[id] = s
		case "client":
			attempts[s.ParentSpanID] = append(attempts[s.ParentSpanID], s)
		}
	}
	return servers, attempts
}
