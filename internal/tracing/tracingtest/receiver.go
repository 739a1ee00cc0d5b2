// Package tracingtest is an in-process OTLP/HTTP receiver for tests: it
// accepts what an OTLP exporter posts to /v1/traces (protobuf, gzipped or
// not), decodes it with the OTLP protobuf definitions and keeps the spans.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, flattened for assertions.
type Span struct {
	// Service is the service.name of the span's resource.
	Service string
	// TraceID, SpanID and ParentSpanID are hex; ParentSpanID is "" for a
	// root span.
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Kind is "server", "client", "internal", "producer" or "consumer".
	Kind string
	// Attrs holds the span's attributes: string, int64, float64 or bool.
	Attrs map[string]any
	// Events are the names of the span's events, in order.
	Events []string
	// Error reports an error status; StatusMessage is its description.
	Error         bool
	StatusMessage string
	Start, End    time.Time
}

// Receiver is an OTLP/HTTP trace receiver on a loopback port.
type Receiver struct {
	// URL is the receiver's base URL, for tracing.endpoint.
	URL string

	mu      sync.Mutex
	spans   []Span        // protected by mu
	arrived chan struct{} // closed and replaced, under mu, when spans arrive
}

// Start starts a receiver that stops when the test ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{arrived: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.ResourceSpans {
		service, _ := value(attr(rs.GetResource().GetAttributes(), "service.name")).(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, flatten(service, s))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.arrived)
	r.arrived = make(chan struct{})
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns the spans received so far, in order of arrival.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// WaitFor waits until n spans or more have arrived, at most timeout, and
// returns them; the test fails when fewer arrived in time.
func (r *Receiver) WaitFor(t testing.TB, n int, timeout time.Duration) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, arrived := append([]Span(nil), r.spans...), r.arrived
		r.mu.Unlock()
		if len(spans) >= n {
			return spans
		}
		select {
		case <-arrived:
		case <-deadline.C:
			t.Fatalf("%d spans arrived in %v, want %d: %+v", len(spans), timeout, n, spans)
		}
	}
}

func flatten(service string, s *tracepb.Span) Span {
	out := Span{
		Service:       service,
		TraceID:       hex.EncodeToString(s.TraceId),
		SpanID:        hex.EncodeToString(s.SpanId),
		ParentSpanID:  hex.EncodeToString(s.ParentSpanId),
		Name:          s.Name,
		Kind:          strings.ToLower(strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_")),
		Attrs:         map[string]any{},
		Error:         s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		StatusMessage: s.GetStatus().GetMessage(),
		Start:         time.Unix(0, int64(s.StartTimeUnixNano)),
		End:           time.Unix(0, int64(s.EndTimeUnixNano)),
	}
	for _, kv := range s.Attributes {
		out.Attrs[kv.Key] = value(kv.Value)
	}
	for _, e := range s.Events {
		out.Events = append(out.Events, e.Name)
	}
	return out
}

func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	}
	return nil
}
