package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminOptions configure the admin API.
type AdminOptions struct {
	// Token, when set, is the bearer token every endpoint but /healthz and
	// /readyz (probes, which tell nothing but up or not) requires
	// ("Authorization: Bearer TOKEN", the scheme in any case); a request
	// without it gets 401 with "WWW-Authenticate: Bearer".
	Token string
	// Gatherer serves /metrics. Nil disables /metrics.
	Gatherer prometheus.Gatherer
	// Reload re-reads and applies the configuration for POST /reload. Nil
	// disables the endpoint.
	Reload func() error
}

// AdminHandler serves the admin API:
//
//	GET  /metrics           Prometheus metrics
//	GET  /status            JSON: routes, per-target health, breaker states, limits, in-flight, last reload
//	GET  /dashboard         a live page of the same and of the requests' rates (see below); / redirects to it
//	GET  /dashboard/events  the page's server-sent events: a DashboardFrame a second
//	POST /dashboard/login   the page's login form, with a token
//	GET  /healthz           200 while the process runs
//	GET  /readyz            200 while serving, 503 once shutdown has begun
//	POST /reload            re-read and apply the configuration
//
// With a token, every endpoint but /healthz and /readyz needs it; the
// dashboard takes it once in its login form, which gives the browser a
// session cookie valid for /dashboard alone (see dashboardSite).
//
// The dashboard samples the gateway from the moment AdminHandler is called
// until the gateway shuts down, on the gateway's clock (Options.Clock: a
// fake clock always has the next sample's timer waiting): every five
// seconds while nobody watches, once a second while at least one event
// stream is open (for every viewer at once, at most 16). It keeps its last
// 300 samples for the charts (five minutes watched, up to 25 before), so
// that a page opened after an incident still shows it. Its rates and
// latencies come from the metrics of Gatherer (sluice_requests_total,
// sluice_request_duration_seconds, sluice_ratelimit_decisions_total); it
// shows none without it.
func (g *Gateway) AdminHandler(o AdminOptions) http.Handler {
	mux := http.NewServeMux()
	d := newDashboard(g, o.Gatherer)
	d.start()
	dash := newDashboardSite(d, o.Token)
	mux.Handle("GET /{$}", http.RedirectHandler("/dashboard", http.StatusFound))
	mux.HandleFunc("GET /dashboard", dash.page)
	mux.HandleFunc("GET /dashboard/events", dash.events)
	mux.HandleFunc("POST /dashboard/login", dash.login)
	guarded := func(h http.Handler) http.Handler {
		if o.Token == "" {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !bearer(r.Header.Get("Authorization"), o.Token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	if o.Gatherer != nil {
		mux.Handle("GET /metrics", guarded(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{})))
	}
	mux.Handle("GET /status", guarded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, g.Status())
	})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if g.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("POST /reload", guarded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Reload == nil {
			writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "reload is not available"})
			return
		}
		if err := o.Reload(); err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, g.LastReload())
			return
		}
		writeJSON(w, http.StatusOK, g.LastReload())
	})))
	return mux
}

// bearer reports whether the Authorization header value auth carries token
// with the Bearer scheme. The scheme is matched without regard to case
// (RFC 9110 §11.1) and may be followed by more than one space.
func bearer(auth, token string) bool {
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return tokenEqual(strings.TrimLeft(cred, " "), token)
}

// tokenEqual reports whether got is token, compared in constant time
// through digests of equal length so that token's length does not show
// either.
func tokenEqual(got, token string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func itoa(n int) string { return strconv.Itoa(n) }
