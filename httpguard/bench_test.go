package httpguard_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httpguard"
)

// admitAll admits every call and ignores outcomes.
type admitAll struct{}

func (admitAll) Acquire(context.Context) (sluice.Permit, error) { return sluice.Permit{}, nil }

func (a admitAll) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, a, next)
}

// discardWriter is a reusable ResponseWriter that writes nowhere.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

func BenchmarkMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	for _, bm := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", ok},
		{"guarded", httpguard.Middleware(sluice.New(admitAll{}), httpguard.Options{})(ok)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				for pb.Next() {
					bm.h.ServeHTTP(w, r)
				}
			})
		})
	}
}

func BenchmarkTransport(b *testing.B) {
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	rt := httpguard.Transport(sluice.New(admitAll{}), next, httpguard.Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "http://upstream/", nil)
		for pb.Next() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}

func BenchmarkStatusFor(b *testing.B) {
	errs := []error{
		&sluice.Rejection{Reason: sluice.RateLimited},
		sluice.ErrTimeout,
		errors.New("boom"),
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_ = httpguard.StatusFor(errs[i%len(errs)])
			i++
		}
	})
}

func BenchmarkWriteError(b *testing.B) {
	err := &sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: 1500 * time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{}
		for pb.Next() {
			w.h = http.Header{}
			httpguard.WriteError(w, err)
		}
	})
}
