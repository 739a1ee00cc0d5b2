package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

func newProvider(t *testing.T, endpoint string, sample float64) *tracing.Provider {
	t.Helper()
	p, err := tracing.New(config.Tracing{Endpoint: endpoint, Sample: sample, ServiceName: "edge"}, "v1.2.3", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

func flush(t *testing.T, p *tracing.Provider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}

// traceparent parses a W3C traceparent into its trace id, span id and flags.
func traceparent(t *testing.T, h string) (traceID, spanID, flags string) {
	t.Helper()
	f := strings.Split(h, "-")
	if len(f) != 4 || f[0] != "00" || len(f[1]) != 32 || len(f[2]) != 16 || len(f[3]) != 2 {
		t.Fatalf("traceparent %q is not 00-<32 hex>-<16 hex>-<2 hex>", h)
	}
	return f[1], f[2], f[3]
}

func TestSpansOfARetriedRequest(t *testing.T) {
	rcv := tracingtest.Start(t)
	p := newProvider(t, rcv.URL, 1)
	t0 := time.Unix(1_700_000_000, 0)
	r := p.Start(tracing.Incoming{Method: []byte("GET"), Scheme: "http", Path: []byte("/v1/infer"), Client: netip.MustParseAddr("127.0.0.9"), RequestID: []byte("req-1")})
	a1 := r.Attempt(1, "http://127.0.0.1:9001", "127.0.0.1:9001", "")
	tp1, _ := a1.Headers()
	a1.End(503, "", t0.Add(2*time.Millisecond))
	a2 := r.Attempt(2, "http://127.0.0.1:9002", "127.0.0.1:9002", "503")
	tp2, ts2 := a2.Headers()
	a2.End(200, "", t0.Add(4*time.Millisecond))
	r.Event("fallback", t0.Add(5*time.Millisecond))
	r.End("infer", 200, "ok", t0.Add(6*time.Millisecond))
	flush(t, p)

	spans := rcv.WaitFor(t, 3, 10*time.Second)
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3: %+v", len(spans), spans)
	}
	var server tracingtest.Span
	var attempts []tracingtest.Span
	for _, s := range spans {
		if s.Kind == "server" {
			server = s
		} else {
			attempts = append(attempts, s)
		}
	}
	if server.Name != "GET infer" || server.ParentSpanID != "" || server.Service != "edge" || server.Error {
		t.Errorf("server span %+v, want a root span GET infer of service edge without error", server)
	}
	for k, want := range map[string]any{
		"http.request.method": "GET", "url.scheme": "http", "url.path": "/v1/infer", "client.address": "127.0.0.9",
		"sluice.request_id": "req-1", "sluice.route": "infer", "http.response.status_code": int64(200), "sluice.outcome": "ok",
	} {
		if got := server.Attrs[k]; got != want {
			t.Errorf("server span %s = %#v, want %#v", k, got, want)
		}
	}
	if fmt.Sprint(server.Events) != "[fallback]" || !server.End.Equal(t0.Add(6*time.Millisecond)) {
		t.Errorf("server span events %v, end %v; want [fallback], ending at t0+6ms", server.Events, server.End)
	}
	if len(attempts) != 2 {
		t.Fatalf("attempt spans %+v, want 2", attempts)
	}
	for i, a := range attempts {
		n := int64(i + 1)
		if a.Kind != "client" || a.Name != "GET" || a.TraceID != server.TraceID || a.ParentSpanID != server.SpanID || a.Attrs["sluice.attempt"] != n {
			t.Errorf("attempt %d span %+v, want a client span GET, child of the server span", n, a)
		}
		if a.Attrs["server.address"] != "127.0.0.1" || a.Attrs["server.port"] != int64(9000+n) || a.Attrs["sluice.target"] != fmt.Sprintf("http://127.0.0.1:%d", 9000+n) {
			t.Errorf("attempt %d target attributes %v", n, a.Attrs)
		}
	}
	if a := attempts[0]; !a.Error || a.Attrs["error.type"] != "503" || a.Attrs["http.response.status_code"] != int64(503) || a.Attrs["http.request.resend_count"] != nil {
		t.Errorf("first attempt %+v, want an error of type 503, no resend count", a)
	}
	if a := attempts[1]; a.Error || a.Attrs["http.request.resend_count"] != int64(1) || a.Attrs["sluice.retry_reason"] != "503" {
		t.Errorf("second attempt %+v, want resend count 1 for reason 503, no error", a)
	}
	for i, h := range []string{string(tp1), string(tp2)} {
		traceID, spanID, flags := traceparent(t, h)
		if traceID != server.TraceID || spanID != attempts[i].SpanID || flags != "01" {
			t.Errorf("attempt %d sends traceparent %s, want trace %s, its own span %s, sampled", i+1, h, server.TraceID, attempts[i].SpanID)
		}
	}
	if ts2 != "" {
		t.Errorf("tracestate %q sent, want none (the client sent none)", ts2)
	}
}

func TestClientParentFollowed(t *testing.T) {
	const (
		parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentSpan  = "00f067aa0ba902b7"
	)
	rcv := tracingtest.Start(t)
	p := newProvider(t, rcv.URL, 0) // new traces are never sampled; a sampled parent is followed
	r := p.Start(tracing.Incoming{Method: []byte("POST"), Path: []byte("/"), Traceparent: []byte("00-" + parentTrace + "-" + parentSpan + "-01"), Tracestate: []byte("vendor=x")})
	if !r.Sampled() || r.TraceID() != parentTrace {
		t.Errorf("sampled %v, trace id %q; want the parent's sampled trace %s", r.Sampled(), r.TraceID(), parentTrace)
	}
	a := r.Attempt(1, "http://127.0.0.1:1", "127.0.0.1:1", "")
	tp, ts := a.Headers()
	a.End(0, "connect_error", time.Time{})
	r.End("", 502, "upstream_unreachable", time.Time{})
	flush(t, p)
	spans := rcv.WaitFor(t, 2, 10*time.Second)
	server, attempt := spans[1], spans[0] // ended in that order
	if server.TraceID != parentTrace || server.ParentSpanID != parentSpan || server.Name != "POST" || !server.Error || server.Attrs["error.type"] != "502" {
		t.Errorf("server span %+v, want a child of the client's span, an error 502", server)
	}
	if attempt.ParentSpanID != server.SpanID || attempt.Attrs["error.type"] != "connect_error" || !attempt.Error {
		t.Errorf("attempt span %+v, want the server span's child with error connect_error", attempt)
	}
	traceID, spanID, flags := traceparent(t, string(tp))
	if traceID != parentTrace || spanID != attempt.SpanID || flags != "01" || ts != "vendor=x" {
		t.Errorf("upstream gets traceparent %s tracestate %q, want the trace %s, the attempt's span %s, sampled, and vendor=x", tp, ts, parentTrace, attempt.SpanID)
	}
}

func TestUnsampledTracesNotExportedButPropagated(t *testing.T) {
	rcv := tracingtest.Start(t)
	p := newProvider(t, rcv.URL, 0)
	unsampledParent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	for _, in := range []tracing.Incoming{
		{Method: []byte("GET")}, // a new trace, at sample 0
		{Method: []byte("GET"), Traceparent: []byte(unsampledParent)},
		{Method: []byte("GET"), Traceparent: []byte("00-bogus")}, // malformed: a new trace
	} {
		r := p.Start(in)
		a := r.Attempt(1, "http://127.0.0.1:1", "127.0.0.1:1", "")
		tp, _ := a.Headers()
		a.End(200, "", time.Time{})
		r.Event("rate_limited", time.Time{})
		r.End("r", 200, "ok", time.Time{})
		if r.Sampled() || r.TraceID() != "" {
			t.Errorf("%+v: sampled %v, trace id %q; want neither", in, r.Sampled(), r.TraceID())
		}
		traceID, _, flags := traceparent(t, string(tp))
		if flags != "00" || string(in.Traceparent) == unsampledParent && traceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%+v: upstream gets %s, want the trace continued, unsampled", in, tp)
		}
	}
	flush(t, p)
	if spans := rcv.Spans(); len(spans) != 0 {
		t.Errorf("%d spans exported, want none: %+v", len(spans), spans)
	}
}

// TestParentFollowedAtSampleOne checks the other half of parent-based
// sampling: a parent that was not sampled is not recorded, whatever the
// ratio for new traces.
func TestParentFollowedAtSampleOne(t *testing.T) {
	rcv := tracingtest.Start(t)
	p := newProvider(t, rcv.URL, 1)
	r := p.Start(tracing.Incoming{Method: []byte("GET"), Traceparent: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")})
	r.End("r", 200, "ok", time.Time{})
	r = p.Start(tracing.Incoming{Method: []byte("GET")})
	r.End("r", 200, "ok", time.Time{})
	flush(t, p)
	if spans := rcv.Spans(); len(spans) != 1 || spans[0].TraceID == "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("spans %+v, want only the new trace's", spans)
	}
}

func TestShutdownFlushes(t *testing.T) {
	rcv := tracingtest.Start(t)
	p, err := tracing.New(config.Tracing{Endpoint: rcv.URL, Sample: 1, ServiceName: "sluice"}, "devel", nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Start(tracing.Incoming{Method: []byte("GET")}).End("r", 200, "ok", time.Time{})
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := rcv.Spans(); len(spans) != 1 {
		t.Errorf("%d spans after Shutdown, want 1", len(spans))
	}
}

// TestOffCostsNothing checks that with tracing off (a nil Provider) every
// step is a no-op that allocates nothing.
func TestOffCostsNothing(t *testing.T) {
	var p *tracing.Provider
	in := tracing.Incoming{Method: []byte("GET")}
	allocs := testing.AllocsPerRun(100, func() {
		r := p.Start(in)
		a := r.Attempt(1, "http://127.0.0.1:1", "127.0.0.1:1", "")
		if tp, _ := a.Headers(); tp != nil {
			t.Fatal("a traceparent with tracing off")
		}
		a.End(200, "", time.Time{})
		r.Event("shed", time.Time{})
		r.End("r", 200, "ok", time.Time{})
		_ = r.TraceID()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request with tracing off, want 0", allocs)
	}
}

// TestExportFailureLogged checks that a collector that cannot be reached
// costs a warning in the gateway's log, once per batch, and no retries.
func TestExportFailureLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	var buf bytes.Buffer
	p, err := tracing.New(config.Tracing{Endpoint: endpoint, Sample: 1, ServiceName: "sluice"}, "devel", slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.Start(tracing.Incoming{Method: []byte("GET")}).End("r", 200, "ok", time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); strings.Count(got, "exporting spans") != 1 || !strings.Contains(got, "level=WARN") || !strings.Contains(got, endpoint+"/v1/traces") {
		t.Errorf("log %q, want one warning naming the collector %s/v1/traces", got, endpoint)
	}
}

func TestInvalidOptions(t *testing.T) {
	_, err := tracing.New(config.Tracing{Endpoint: "grpc://c:4317", Sample: 2}, "devel", nil)
	if !errors.Is(err, sluice.ErrInvalidOptions) {
		t.Fatalf("err = %v, want sluice.ErrInvalidOptions", err)
	}
	for _, want := range []string{`tracing: Endpoint "grpc://c:4317" is not an http or https URL with a host`, "tracing: Sample 2 is not a fraction in [0, 1]", "tracing: ServiceName is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to name: %s", err, want)
		}
	}
}

// TestUnknownMethod checks the HTTP semantic conventions for a method
// outside RFC 9110: http.request.method is _OTHER, the method itself
// http.request.method_original.
func TestUnknownMethod(t *testing.T) {
	rcv := tracingtest.Start(t)
	p := newProvider(t, rcv.URL, 1)
	p.Start(tracing.Incoming{Method: []byte("PURGE")}).End("", 404, "no_route", time.Time{})
	flush(t, p)
	s := rcv.WaitFor(t, 1, 10*time.Second)[0]
	if s.Name != "HTTP" || s.Attrs["http.request.method"] != "_OTHER" || s.Attrs["http.request.method_original"] != "PURGE" {
		t.Errorf("span %+v, want the name HTTP, method _OTHER, original PURGE", s)
	}
}
