package upstream

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestActiveHealthChecksFollowTheTarget(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			t.Errorf("checked %s, want /healthz", r.URL.Path)
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	clk := clock.NewFake(time.Unix(0, 0))
	var logs syncBuffer
	p, err := New("api", &config.Upstream{Targets: []string{srv.URL},
		IdleTimeout: config.Duration(50 * time.Millisecond), ConnectTimeout: config.Duration(5 * time.Second),
		Health: &config.Health{Path: "/healthz", Interval: config.Duration(time.Second), Timeout: config.Duration(5 * time.Second)}},
		Options{Clock: clk, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tg := p.Targets()[0]
	if !tg.Healthy() {
		t.Fatal("unhealthy before any check")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Start()
	p.Start() // a second call starts nothing more
	defer p.Stop()

	// A round of checks has ended when the loop waits on the clock.
	round := func() {
		t.Helper()
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal("no round of checks ended:", err)
		}
	}
	round()
	if tg.Healthy() || tg.Available() {
		t.Fatal("healthy after a 503")
	}
	status.Store(http.StatusNoContent)
	clk.Advance(time.Second)
	round()
	if !tg.Healthy() {
		t.Fatal("unhealthy after a 204")
	}
	if got := strings.Count(logs.String(), "target health changed"); got != 2 {
		t.Errorf("%d health changes logged, want 2:\n%s", got, logs.String())
	}
	p.Stop()
	p.Stop()
	tg.Client.CloseIdleConnections()
}
