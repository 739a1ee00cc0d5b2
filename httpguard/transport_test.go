package httpguard_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httpguard"
)

// upstream is a loopback server that records the bodies it receives and
// answers the n-th request (from 0) with statuses[n], or the last status.
type upstream struct {
	*httptest.Server
	statuses []int
	retry    string // Retry-After for failures

	mu     sync.Mutex
	bodies []string
	conns  int // connections accepted
}

func newUpstream(t *testing.T, statuses ...int) *upstream {
	t.Helper()
	u := &upstream{statuses: statuses}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.mu.Lock()
			u.conns++
			u.mu.Unlock()
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	n := len(u.bodies)
	u.bodies = append(u.bodies, string(b))
	u.mu.Unlock()
	status := u.statuses[min(n, len(u.statuses)-1)]
	if status >= 500 && u.retry != "" {
		w.Header().Set("Retry-After", u.retry)
	}
	w.WriteHeader(status)
	io.WriteString(w, http.StatusText(status))
}

func (u *upstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

func (u *upstream) accepted() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conns
}

// client returns a client whose transport is a fresh http.Transport behind
// g, closed with the test.
func client(t *testing.T, g *sluice.Guard, opts httpguard.Options, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	var next http.RoundTripper = base
	if wrap != nil {
		next = wrap(base)
	}
	return &http.Client{Transport: httpguard.Transport(g, next, opts)}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

func TestTransportClassifiesStatus(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		isFailure func(int) bool
		want      sluice.Class
	}{
		{"200", 200, nil, sluice.Success},
		{"404", 404, nil, sluice.Success},
		{"500", 500, nil, sluice.Failure},
		{"503", 503, nil, sluice.Failure},
		{"429 custom", 429, func(s int) bool { return s == 429 }, sluice.Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, tt.status)
			up.retry = "7"
			rec := newRecorder()
			c := client(t, sluice.New(rec), httpguard.Options{IsFailure: tt.isFailure}, nil)
			resp, err := c.Get(up.URL)
			if err != nil {
				t.Fatalf("Get: %v (a failure status must reach the caller as a response)", err)
			}
			if body := readAll(t, resp); resp.StatusCode != tt.status || body != http.StatusText(tt.status) {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
			o := <-rec.ch
			if o.Class != tt.want {
				t.Errorf("class = %v, want %v", o.Class, tt.want)
			}
			if tt.want == sluice.Failure {
				var se *httpguard.StatusError
				if !errors.As(o.Err, &se) || se.StatusCode != tt.status || se.Response == nil {
					t.Fatalf("err = %v, want a StatusError with the response", o.Err)
				}
				if tt.status >= 500 && se.RetryAfter != 7*time.Second {
					t.Errorf("RetryAfter = %v, want 7s", se.RetryAfter)
				}
			}
		})
	}
}

// oneByOne is a request body without GetBody and of unknown length.
type oneByOne struct{ r io.Reader }

func (b oneByOne) Read(p []byte) (int, error) { return b.r.Read(p[:min(len(p), 1)]) }

func TestTransportReplaysBody(t *testing.T) {
	const payload = `{"prompt":"hello, upstream"}`
	tests := []struct {
		name string
		req  func(url string) *http.Request
		want string // the body the upstream must see
	}{
		{"GetBody", func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(payload))
			return req
		}, payload},
		{"buffered, known length", func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPut, url, io.NopCloser(strings.NewReader(payload)))
			req.ContentLength = int64(len(payload))
			return req
		}, payload},
		{"buffered, unknown length", func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPut, url, io.NopCloser(oneByOne{strings.NewReader(payload)}))
			return req
		}, payload},
		{"buffered, empty", func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPut, url, io.NopCloser(strings.NewReader("")))
			return req
		}, ""},
		{"no body", func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			return req
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, 503, 502, 200)
			rec := newRecorder()
			c := client(t, sluice.New(retryFailures{max: 3}, rec), httpguard.Options{}, nil)
			resp, err := c.Do(tt.req(up.URL))
			if err != nil {
				t.Fatal(err)
			}
			if body := readAll(t, resp); resp.StatusCode != 200 || body != "OK" {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
			got := up.received()
			if len(got) != 3 {
				t.Fatalf("upstream got %d requests, want 3", len(got))
			}
			for i, b := range got {
				if b != tt.want {
					t.Errorf("attempt %d sent %q, want %q", i+1, b, tt.want)
				}
			}
			wantClasses := []sluice.Class{sluice.Failure, sluice.Failure, sluice.Success}
			if got := rec.classes(); !equalClasses(got, wantClasses) {
				t.Errorf("classes = %v, want %v", got, wantClasses)
			}
		})
	}
}

func equalClasses(a, b []sluice.Class) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTransportClosesSupersededResponses(t *testing.T) {
	up := newUpstream(t, 503)
	var cc closeCounter
	wrap := func(next http.RoundTripper) http.RoundTripper { return countingTransport{next: next, c: &cc} }
	c := client(t, sluice.New(retryFailures{max: 3}), httpguard.Options{}, wrap)
	resp, err := c.Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	if n := cc.count(); n != 2 {
		t.Errorf("%d bodies closed before the caller read the last response, want 2 (the superseded ones)", n)
	}
	if body := readAll(t, resp); resp.StatusCode != 503 || body != "Service Unavailable" {
		t.Errorf("got %d %q, want the last 503", resp.StatusCode, body)
	}
	if n := cc.count(); n != 3 {
		t.Errorf("%d bodies closed, want 3", n)
	}
	if n := len(up.received()); n != 3 {
		t.Errorf("upstream got %d requests, want 3", n)
	}
	// Drained bodies free their connection for the next attempt.
	if n := up.accepted(); n != 1 {
		t.Errorf("upstream accepted %d connections, want 1", n)
	}
}

// firstWins is a policy that runs next twice and settles on the first
// result, whose response a later attempt superseded.
type firstWins struct{}

func (firstWins) Run(ctx context.Context, next sluice.Call) sluice.Result {
	first := next(ctx)
	next(ctx)
	return first
}

func TestTransportSupersededResponseStillReadable(t *testing.T) {
	long := strings.Repeat("y", 100<<10)
	tests := []struct {
		name    string
		body    string
		want    string
		wantErr bool
	}{
		{"short body kept", "warming up", "warming up", false},
		{"long body cut", long, long[:64<<10], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.WriteHeader(503)
					io.WriteString(w, tt.body)
				}
			}))
			defer srv.Close()
			c := client(t, sluice.New(firstWins{}), httpguard.Options{}, nil)
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if resp.StatusCode != 503 || string(b) != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("got %d, %d bytes, err %v; want the first response's %d bytes, error %v", resp.StatusCode, len(b), err, len(tt.want), tt.wantErr)
			}
		})
	}
}

func TestTransportUpgrade(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		buf.Flush()
		io.Copy(conn, buf) // echo until the client closes
	}))
	defer srv.Close()
	c := client(t, sluice.New(newRecorder()), httpguard.Options{}, nil)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != 101 || !ok {
		t.Fatalf("status %d, body %T: want 101 with an io.ReadWriteCloser", resp.StatusCode, resp.Body)
	}
	if _, err := io.WriteString(rwc, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(rwc, got); err != nil || string(got) != "ping" {
		t.Errorf("echo = %q, %v", got, err)
	}
}

func TestTransportGetBodyFails(t *testing.T) {
	up := newUpstream(t, 503)
	rec := newRecorder()
	c := client(t, sluice.New(retryFailures{max: 3}, rec), httpguard.Options{}, nil)
	req, _ := http.NewRequest(http.MethodPut, up.URL, strings.NewReader("payload"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 503 || body != "Service Unavailable" {
		t.Errorf("got %d %q, want the first attempt's 503", resp.StatusCode, body)
	}
	if err := rec.outcome(1).Err; rec.outcome(1).Class != sluice.Dropped || !errors.Is(err, httpguard.ErrNotReplayable) || !strings.Contains(err.Error(), "gone") {
		t.Errorf("second attempt = %v %v", rec.outcome(1).Class, err)
	}
}

// failingBody fails every read.
type failingBody struct{ trackedBody }

func (*failingBody) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestTransportRequestBodyReadFails(t *testing.T) {
	up := newUpstream(t, 200)
	rec := newRecorder()
	c := client(t, sluice.New(rec), httpguard.Options{}, nil)
	body := &failingBody{}
	req, _ := http.NewRequest(http.MethodPost, up.URL, body)
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "disk on fire") || !body.closed.Load() {
		t.Errorf("err = %v, body closed %v", err, body.closed.Load())
	}
	if o := <-rec.ch; o.Class != sluice.Dropped {
		t.Errorf("class = %v, want dropped", o.Class)
	}
	if n := len(up.received()); n != 0 {
		t.Errorf("upstream got %d requests", n)
	}
}

// idleCloser records CloseIdleConnections.
type idleCloser struct {
	http.RoundTripper
	closed bool
}

func (c *idleCloser) CloseIdleConnections() { c.closed = true }

func TestTransportCloseIdleConnections(t *testing.T) {
	next := &idleCloser{}
	c := &http.Client{Transport: httpguard.Transport(sluice.New(), next, httpguard.Options{})}
	c.CloseIdleConnections()
	if !next.closed {
		t.Error("CloseIdleConnections not forwarded")
	}
}

func TestTransportLargeBodyIsNotRetried(t *testing.T) {
	payload := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		length int64
	}{
		{"known length", int64(len(payload))},
		{"unknown length", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, 503)
			rec := newRecorder()
			c := client(t, sluice.New(retryFailures{max: 3}, rec), httpguard.Options{MaxReplayBody: 16}, nil)
			body := &trackedBody{Reader: strings.NewReader(payload)}
			req, _ := http.NewRequest(http.MethodPut, up.URL, body)
			req.ContentLength = tt.length
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, resp); resp.StatusCode != 503 || got != "Service Unavailable" {
				t.Errorf("got %d %q, want the first attempt's 503", resp.StatusCode, got)
			}
			if got := up.received(); len(got) != 1 || got[0] != payload {
				t.Errorf("upstream got %d requests (%q), want 1 with the whole body", len(got), got)
			}
			classes := rec.classes()
			if want := []sluice.Class{sluice.Failure, sluice.Dropped}; !equalClasses(classes, want) {
				t.Errorf("classes = %v, want %v", classes, want)
			}
			if err := rec.outcome(1).Err; !errors.Is(err, httpguard.ErrNotReplayable) || !strings.Contains(err.Error(), "MaxReplayBody") {
				t.Errorf("second attempt's error = %v, want ErrNotReplayable", err)
			}
			var se *httpguard.StatusError
			if !errors.As(rec.outcome(1).Err, &se) || se.StatusCode != 503 {
				t.Errorf("second attempt's error %v does not carry the first 503", rec.outcome(1).Err)
			}
			if !body.closed.Load() {
				t.Error("request body not closed")
			}
		})
	}
}

func TestTransportRejection(t *testing.T) {
	up := newUpstream(t, 200)
	reject := &recorder{reject: &sluice.Rejection{Reason: sluice.CircuitOpen, RetryAfter: time.Second}}
	c := client(t, sluice.New(reject), httpguard.Options{}, nil)
	body := &trackedBody{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequest(http.MethodPost, up.URL, body)
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error")
	}
	if !errors.Is(err, sluice.ErrRejected) || httpguard.StatusFor(err) != 503 {
		t.Errorf("err = %v (status %d), want a 503 rejection", err, httpguard.StatusFor(err))
	}
	if d, ok := sluice.RetryAfter(err); !ok || d != time.Second {
		t.Errorf("RetryAfter = %v, %v", d, ok)
	}
	if n := len(up.received()); n != 0 {
		t.Errorf("upstream got %d requests", n)
	}
	if !body.closed.Load() {
		t.Error("request body not closed")
	}
}

func TestTransportClientCancelIsIgnored(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	rec := newRecorder()
	c := client(t, sluice.New(rec), httpguard.Options{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if o := <-rec.ch; o.Class != sluice.Ignored {
		t.Errorf("class = %v, want ignored", o.Class)
	}
}

// A per-attempt context ends when its attempt returns; the response body
// must outlive it.
func TestTransportBodySurvivesAttemptContext(t *testing.T) {
	more := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		<-more
		io.WriteString(w, "second")
	}))
	defer srv.Close()
	c := client(t, sluice.New(attemptContext{}), httpguard.Options{}, nil)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	close(more) // the attempt's context is cancelled by now
	if body := readAll(t, resp); body != "first second" {
		t.Errorf("body = %q", body)
	}
}

// An unreachable upstream is a 502, and its outcome is what the guard's
// Classifier makes of the error (by default a Failure).
func TestTransportUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ignoreAll := func(context.Context, error) sluice.Class { return sluice.Ignored }
	for _, tc := range []struct {
		name string
		c    sluice.Classifier
		want sluice.Class
	}{
		{"default classifier", nil, sluice.Failure},
		{"custom classifier", ignoreAll, sluice.Ignored},
	} {
		rec := newRecorder()
		c := client(t, sluice.New(rec).WithClassifier(tc.c), httpguard.Options{}, nil)
		resp, err := c.Get("http://" + addr)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: no error", tc.name)
		}
		if got := httpguard.StatusFor(err); got != http.StatusBadGateway {
			t.Errorf("%s: StatusFor(%v) = %d, want 502", tc.name, err, got)
		}
		if o := <-rec.ch; o.Class != tc.want {
			t.Errorf("%s: class = %v, want %v", tc.name, o.Class, tc.want)
		}
	}
}

func TestTransportNilGuardAndNext(t *testing.T) {
	up := newUpstream(t, 200)
	c := &http.Client{Transport: httpguard.Transport(nil, nil, httpguard.Options{})}
	resp, err := c.Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "OK" {
		t.Errorf("body = %q", body)
	}
}

// Each attempt gets a fresh request: a handler that mutates the request it
// was given cannot affect the next attempt, and the caller's request is left
// alone.
func TestTransportClonesRequest(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Attempt"))
		mu.Unlock()
		r.Header.Set("X-Attempt", "mutated")
		return &http.Response{StatusCode: 503, Body: io.NopCloser(bytes.NewReader(nil)), Request: r}, nil
	})
	rt := httpguard.Transport(sluice.New(retryFailures{max: 2}), next, httpguard.Options{})
	req := httptest.NewRequest(http.MethodGet, "http://upstream/", nil)
	req.Header.Set("X-Attempt", "original")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(seen) != 2 || seen[0] != "original" || seen[1] != "original" {
		t.Errorf("attempts saw %q", seen)
	}
	if got := req.Header.Get("X-Attempt"); got != "original" {
		t.Errorf("caller's request header = %q", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A hedge-like policy may leave an attempt running after the guard returned.
// The straggler started before the guard returned, so it superseded the
// first response (kept readable); its own response is closed when it
// arrives.
func TestTransportStragglerResponseClosed(t *testing.T) {
	var cc closeCounter
	entered, proceed, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		body := &countingBody{ReadCloser: io.NopCloser(strings.NewReader("attempt " + strconv.Itoa(int(n)))), c: &cc}
		if n == 2 {
			close(entered)
			<-proceed
		}
		return &http.Response{StatusCode: 200, Body: body, Request: r}, nil
	})
	p := straggler{entered: entered, returned: returned}
	rt := httpguard.Transport(sluice.New(p), next, httpguard.Options{})
	resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, "http://upstream/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if n := cc.count(); n != 1 {
		t.Errorf("%d bodies closed, want 1 (the superseded first, drained)", n)
	}
	close(proceed)
	<-returned
	if n := cc.count(); n != 2 {
		t.Errorf("%d bodies closed, want 2 (the straggler's too)", n)
	}
	if body := readAll(t, resp); body != "attempt 1" {
		t.Errorf("body = %q, want the first attempt's", body)
	}
}

// straggler runs a second attempt in the background, waits until it
// entered the round trip and returns the first attempt's result.
type straggler struct{ entered, returned chan struct{} }

func (s straggler) Run(ctx context.Context, next sluice.Call) sluice.Result {
	r := next(ctx)
	go func() {
		defer close(s.returned)
		next(ctx)
	}()
	<-s.entered
	return r
}
