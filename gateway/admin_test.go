package gateway_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/gateway"
)

// TestAdminBearerScheme checks POST /reload's token: the Bearer scheme is
// matched in any case and may be followed by several spaces (RFC 9110
// §11.1); a wrong, missing or differently-schemed credential gets 401 with
// WWW-Authenticate: Bearer and does not reload.
func TestAdminBearerScheme(t *testing.T) {
	cfg := parseConfig(t, `upstreams: {up: {targets: ["http://127.0.0.1:1"]}}
routes: [{name: r, upstream: up}]
`)
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reloads := 0
	h := g.AdminHandler(gateway.AdminOptions{Token: "s3cret", Reload: func() error { reloads++; return nil }})
	for _, tt := range []struct {
		auth string
		code int
	}{
		{"Bearer s3cret", 200},
		{"bearer s3cret", 200},
		{"BEARER s3cret", 200},
		{"bEaReR   s3cret", 200},
		{"", 401},
		{"Bearer", 401},
		{"Bearer ", 401},
		{"Bearer s3cre", 401},
		{"Bearer s3cret2", 401},
		{"Bearer S3CRET", 401},
		{"Basic s3cret", 401},
		{"s3cret", 401},
		{"Bearers3cret", 401},
	} {
		req := httptest.NewRequest("POST", "/reload", nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		before := reloads
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tt.code {
			t.Errorf("Authorization %q: %d, want %d", tt.auth, w.Code, tt.code)
		}
		if got := reloads - before; (tt.code == 200) != (got == 1) {
			t.Errorf("Authorization %q: %d reloads", tt.auth, got)
		}
		if tt.code == http.StatusUnauthorized {
			if a := w.Header().Get("WWW-Authenticate"); len(a) < 6 || a[:6] != "Bearer" {
				t.Errorf("Authorization %q: WWW-Authenticate %q, want the Bearer scheme", tt.auth, a)
			}
		}
	}
}

// TestAdminTokenGuardsEveryEndpoint: with a token, /status, /metrics and
// /reload need it; the probes /healthz and /readyz do not.
func TestAdminTokenGuardsEveryEndpoint(t *testing.T) {
	cfg := parseConfig(t, `upstreams: {up: {targets: ["http://127.0.0.1:1"]}}
routes: [{name: r, upstream: up}]
`)
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := g.AdminHandler(gateway.AdminOptions{Token: "s3cret", Gatherer: prometheus.NewRegistry(),
		Reload: func() error { return nil }})
	for _, tt := range []struct {
		method, path string
		open         bool
	}{
		{"GET", "/status", false}, {"GET", "/metrics", false}, {"POST", "/reload", false},
		{"GET", "/healthz", true}, {"GET", "/readyz", true},
	} {
		for _, auth := range []string{"", "Bearer s3cret"} {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			want := http.StatusOK
			if auth == "" && !tt.open {
				want = http.StatusUnauthorized
			}
			if w.Code != want {
				t.Errorf("%s %s with %q: %d, want %d", tt.method, tt.path, auth, w.Code, want)
			}
		}
	}
}
