package httpguard_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httpguard"
)

// serve starts a loopback server running h behind Middleware(g, opts).
func serve(t *testing.T, g *sluice.Guard, opts httpguard.Options, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(httpguard.Middleware(g, opts)(h))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestMiddlewareClassifiesStatus(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		isFailure func(int) bool
		want      sluice.Class
	}{
		{"200", 200, nil, sluice.Success},
		{"no write", 0, nil, sluice.Success},
		{"404", 404, nil, sluice.Success},
		{"429 default", 429, nil, sluice.Success},
		{"500", 500, nil, sluice.Failure},
		{"503", 503, nil, sluice.Failure},
		{"429 custom", 429, func(s int) bool { return s == 429 || s >= 500 }, sluice.Failure},
		{"503 custom", 503, func(s int) bool { return s == 429 }, sluice.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status != 0 {
					w.Header().Set("Retry-After", "4")
					w.WriteHeader(tt.status)
				}
			})
			srv := serve(t, sluice.New(rec), httpguard.Options{IsFailure: tt.isFailure}, h)
			resp, _ := get(t, srv.URL)
			if want := max(tt.status, 200); resp.StatusCode != want {
				t.Errorf("status = %d, want %d", resp.StatusCode, want)
			}
			o := <-rec.ch
			if o.Class != tt.want {
				t.Errorf("class = %v, want %v (err %v)", o.Class, tt.want, o.Err)
			}
			var se *httpguard.StatusError
			if tt.want == sluice.Failure {
				if !errors.As(o.Err, &se) || se.StatusCode != tt.status || se.RetryAfter != 4*time.Second {
					t.Errorf("err = %#v, want a StatusError %d retrying after 4s", o.Err, tt.status)
				}
			}
		})
	}
}

func TestMiddlewareClientCancelIsIgnored(t *testing.T) {
	rec := newRecorder()
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		w.WriteHeader(http.StatusInternalServerError)
	})
	srv := serve(t, sluice.New(rec), httpguard.Options{}, h)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error = %v, want context.Canceled", err)
	}
	if o := <-rec.ch; o.Class != sluice.Ignored || !errors.Is(o.Err, context.Canceled) {
		t.Errorf("outcome = %v %v, want ignored with context.Canceled", o.Class, o.Err)
	}
}

func TestMiddlewareRejections(t *testing.T) {
	tests := []struct {
		name       string
		reject     error
		status     int
		retryAfter string
		body       string
	}{
		{"rate limited", &sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: 2 * time.Second}, 429, "2", `{"error":"rate_limited","retry_after":2}`},
		{"circuit open", &sluice.Rejection{Reason: sluice.CircuitOpen, RetryAfter: 4200 * time.Millisecond}, 503, "5", `{"error":"circuit_open","retry_after":5}`},
		{"overloaded", &sluice.Rejection{Reason: sluice.Overloaded}, 503, "1", `{"error":"overloaded","retry_after":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Bool
			h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Store(true) })
			srv := serve(t, sluice.New(&recorder{reject: tt.reject}), httpguard.Options{}, h)
			resp, body := get(t, srv.URL)
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			if body != tt.body+"\n" {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
			if ran.Load() {
				t.Error("the handler ran")
			}
		})
	}
}

func TestMiddlewareErrorHandler(t *testing.T) {
	reject := &recorder{reject: &sluice.Rejection{Reason: sluice.Overloaded}}
	opts := httpguard.Options{ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
		http.Error(w, "busy: "+r.URL.Path, httpguard.StatusFor(err))
	}}
	srv := serve(t, sluice.New(reject), opts, http.NotFoundHandler())
	resp, body := get(t, srv.URL+"/x")
	if resp.StatusCode != 503 || body != "busy: /x\n" {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
}

func TestMiddlewareTimeoutBeforeWrite(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the handler gives up without writing
	})
	srv := serve(t, sluice.New(expired{}), httpguard.Options{}, h)
	resp, body := get(t, srv.URL)
	if resp.StatusCode != http.StatusGatewayTimeout || body != `{"error":"timeout"}`+"\n" {
		t.Errorf("got %d %q, want 504 timeout", resp.StatusCode, body)
	}
}

func TestMiddlewareTimeoutAfterWriteKeepsResponse(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
	})
	srv := serve(t, sluice.New(expired{}), httpguard.Options{}, h)
	resp, body := get(t, srv.URL)
	if resp.StatusCode != http.StatusOK || body != "partial" {
		t.Errorf("got %d %q, want the handler's 200 partial", resp.StatusCode, body)
	}
}

func TestMiddlewareRetryDoesNotRunHandlerTwice(t *testing.T) {
	rec := newRecorder()
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "boom", http.StatusServiceUnavailable)
	})
	srv := serve(t, sluice.New(retryFailures{max: 3}, rec), httpguard.Options{}, h)
	resp, body := get(t, srv.URL)
	if resp.StatusCode != 503 || body != "boom\n" {
		t.Errorf("got %d %q, want the handler's single 503", resp.StatusCode, body)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	first, second := <-rec.ch, <-rec.ch
	if first.Class != sluice.Failure || second.Class != sluice.Dropped || !errors.Is(second.Err, httpguard.ErrNotReplayable) {
		t.Errorf("outcomes = %v, %v (%v); want failure, then dropped as not replayable", first.Class, second.Class, second.Err)
	}
}

func TestMiddlewareFlushes(t *testing.T) {
	rec := newRecorder()
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-next
		io.WriteString(w, "data: 2\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
	})
	srv := serve(t, sluice.New(rec), httpguard.Options{}, h)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The first event arrives while the handler still waits: it was flushed.
	if line, err := br.ReadString('\n'); err != nil || line != "data: 1\n" {
		t.Fatalf("first line = %q, %v", line, err)
	}
	close(next)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: 2\n\n" {
		t.Errorf("rest = %q, %v", rest, err)
	}
	if o := <-rec.ch; o.Class != sluice.Success {
		t.Errorf("class = %v, want success", o.Class)
	}
}

func TestMiddlewareReaderFrom(t *testing.T) {
	rec := newRecorder()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rf, ok := w.(io.ReaderFrom)
		if !ok {
			t.Error("the ResponseWriter is not an io.ReaderFrom")
			return
		}
		if _, err := rf.ReadFrom(strings.NewReader("copied")); err != nil {
			t.Error(err)
		}
	})
	srv := serve(t, sluice.New(rec), httpguard.Options{}, h)
	if resp, body := get(t, srv.URL); resp.StatusCode != 200 || body != "copied" {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if o := <-rec.ch; o.Class != sluice.Success {
		t.Errorf("class = %v", o.Class)
	}
}

func TestMiddlewareHijack(t *testing.T) {
	rec := newRecorder()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		buf.Flush()
	})
	srv := serve(t, sluice.New(rec), httpguard.Options{}, h)
	if resp, body := get(t, srv.URL); resp.StatusCode != 200 || body != "hijacked" {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if o := <-rec.ch; o.Class != sluice.Success {
		t.Errorf("class = %v", o.Class)
	}
}

func TestMiddlewareRateLimitHeaders(t *testing.T) {
	q := quota{h: httpguard.RateLimitHeaders{Policy: "default", Limit: 100, Remaining: 42, Window: time.Minute, Reset: 30 * time.Second}}
	tests := []struct {
		name    string
		guard   *sluice.Guard
		handler http.HandlerFunc
		status  int
	}{
		{"written by the handler", sluice.New(q), func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }, 200},
		{"handler writes nothing", sluice.New(q), func(http.ResponseWriter, *http.Request) {}, 200},
		{"handler flushes", sluice.New(q), func(w http.ResponseWriter, r *http.Request) { w.(http.Flusher).Flush() }, 200},
		{"rejected further in", sluice.New(q, &recorder{reject: &sluice.Rejection{Reason: sluice.Overloaded}}), nil, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, tt.guard, httpguard.Options{}, tt.handler)
			resp, _ := get(t, srv.URL)
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if got := resp.Header.Get("RateLimit-Policy"); got != `"default";q=100;w=60` {
				t.Errorf("RateLimit-Policy = %q", got)
			}
			if got := resp.Header.Values("RateLimit"); len(got) != 1 || got[0] != `"default";r=42;t=30` {
				t.Errorf("RateLimit = %q", got)
			}
		})
	}
}

func TestMiddlewareAddHeadersTooLate(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !httpguard.AddHeaders(r.Context(), httpguard.RateLimitHeaders{}) {
			t.Error("AddHeaders before the response was written reported false")
		}
		w.WriteHeader(http.StatusNoContent)
		if httpguard.AddHeaders(r.Context(), httpguard.RateLimitHeaders{}) {
			t.Error("AddHeaders after the response was written reported true")
		}
	})
	srv := serve(t, sluice.New(newRecorder()), httpguard.Options{}, h)
	if resp, _ := get(t, srv.URL); resp.StatusCode != http.StatusNoContent || resp.Header.Get("RateLimit") == "" {
		t.Errorf("got %d %v", resp.StatusCode, resp.Header)
	}
}

func TestMiddlewareNilGuard(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })
	if got := httpguard.Middleware(nil, httpguard.Options{})(h); got == nil {
		t.Fatal("nil handler")
	}
	rec := httptest.NewRecorder()
	httpguard.Middleware(nil, httpguard.Options{})(h).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 201 {
		t.Errorf("status = %d", rec.Code)
	}
}

// Informational responses pass through without committing the response.
func TestMiddlewareInformationalStatus(t *testing.T) {
	rec := newRecorder()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusBadGateway)
	})
	srv := serve(t, sluice.New(rec), httpguard.Options{}, h)
	if resp, _ := get(t, srv.URL); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status = %d", resp.StatusCode)
	}
	if o := <-rec.ch; o.Class != sluice.Failure || !strings.Contains(o.Err.Error(), strconv.Itoa(http.StatusBadGateway)) {
		t.Errorf("outcome = %v %v", o.Class, o.Err)
	}
}

func TestMiddlewareReaderFromWithoutUnderlyingReaderFrom(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := w.(io.ReaderFrom).ReadFrom(strings.NewReader("copied")); err != nil {
			t.Error(err)
		}
	})
	rec := httptest.NewRecorder() // has no ReadFrom
	httpguard.Middleware(sluice.New(newRecorder()), httpguard.Options{})(h).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Body.String() != "copied" {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
}

func TestMiddlewareResponseControllerUnwraps(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Time{}); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		if err := rc.EnableFullDuplex(); err != nil {
			t.Errorf("EnableFullDuplex: %v", err)
		}
	})
	srv := serve(t, sluice.New(newRecorder()), httpguard.Options{}, h)
	if resp, _ := get(t, srv.URL); resp.StatusCode != 200 {
		t.Errorf("status = %d", resp.StatusCode)
	}
}

// The guard's Classifier decides what an attempt that ran out of time is.
func TestMiddlewareUsesGuardClassifier(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	lenient := func(ctx context.Context, err error) sluice.Class {
		if errors.Is(err, context.DeadlineExceeded) {
			return sluice.Ignored
		}
		return sluice.DefaultClassifier(ctx, err)
	}
	for _, tc := range []struct {
		name string
		c    sluice.Classifier
		want sluice.Class
	}{
		{"default", nil, sluice.Failure},
		{"custom", lenient, sluice.Ignored},
	} {
		rec := newRecorder()
		srv := serve(t, sluice.New(expired{}, rec).WithClassifier(tc.c), httpguard.Options{}, h)
		get(t, srv.URL)
		if o := <-rec.ch; o.Class != tc.want {
			t.Errorf("%s classifier: class = %v, want %v", tc.name, o.Class, tc.want)
		}
	}
}
