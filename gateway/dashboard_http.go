package gateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"time"
)

// The dashboard page, its login page and their Content-Security-Policy:
// nothing is fetched but the page's own event stream, and the page's one
// inline script runs by its digest.
var (
	//go:embed dashboard.html
	dashboardPage []byte
	//go:embed dashboard_login.html
	loginPageText string
	loginPage     = template.Must(template.New("login").Parse(loginPageText))
	dashboardCSP  = "default-src 'none'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; script-src " + scriptDigest(dashboardPage)
	loginCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

// Dashboard HTTP settings.
const (
	// sessionCookie names the cookie that carries a browser's dashboard
	// session once the token was given to the login form.
	sessionCookie = "sluice_dashboard"
	// maxLoginBody bounds the login form a client may send.
	maxLoginBody = 4 << 10
	// dashWriteTimeout bounds each write to a viewer: one that reads
	// nothing for that long loses its stream.
	dashWriteTimeout = 10 * time.Second
)

// dashboardSite serves the dashboard over HTTP: the page, its event stream
// and, when the admin API has a token, a login form.
//
// A browser cannot put a bearer token on an EventSource request, so the
// login form (a POST, which keeps the token out of URLs, browser history
// and logs) exchanges the token for a session cookie: HttpOnly, SameSite
// Strict, Secure over TLS, scoped to /dashboard so that it opens nothing
// else of the admin API. Its value is an HMAC of a fixed text keyed with
// the token: it is valid until the token changes and does not reveal the
// token. The page and the stream accept the bearer token as well.
type dashboardSite struct {
	d       *dashboard
	token   string
	session string // the session cookie's value; "" without a token
}

func newDashboardSite(d *dashboard, token string) *dashboardSite {
	s := &dashboardSite{d: d, token: token}
	if token != "" {
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte("sluice dashboard session"))
		s.session = base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	return s
}

// authorized reports whether r may see the dashboard.
func (s *dashboardSite) authorized(r *http.Request) bool {
	if s.token == "" || bearer(r.Header.Get("Authorization"), s.token) {
		return true
	}
	c, err := r.Cookie(sessionCookie)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
}

// page serves the dashboard, or the login form to a browser without a
// session.
func (s *dashboardSite) page(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		s.loginForm(w, http.StatusUnauthorized, "")
		return
	}
	pageHeaders(w, dashboardCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(dashboardPage)
}

// login checks the token posted by the login form and, when it is right,
// sets the session cookie and sends the browser to the dashboard.
func (s *dashboardSite) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		s.loginForm(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if s.token != "" {
		if !tokenEqual(r.PostForm.Get("token"), s.token) {
			s.loginForm(w, http.StatusUnauthorized, "Wrong token.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.session, Path: "/dashboard",
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	}
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

func (s *dashboardSite) loginForm(w http.ResponseWriter, code int, message string) {
	pageHeaders(w, loginCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	w.WriteHeader(code)
	_ = loginPage.Execute(w, message)
}

// events serves the event stream: an event "history" with the history's
// points (a JSON array, oldest first), then an event "sample" with each
// sample (a DashboardFrame), the last one first if there is one. The
// stream ends when the client goes away, reads too slowly
// (dashWriteTimeout) or the gateway shuts down; a gateway shutting down or
// watched by dashMaxViewers already answers 503. A HEAD gets the stream's
// headers and is no viewer.
func (s *dashboardSite) events(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	if r.Method == http.MethodHead {
		// The stream's headers alone: a HEAD reads no event, and takes no
		// viewer's place.
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		return
	}
	v, history, last, ok := s.d.join()
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "too many viewers, or shutting down"})
		return
	}
	defer s.d.leave(v)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	hb, _ := json.Marshal(history) // points hold only numbers and names
	if !sendEvent(w, rc, "history", hb) || (last != nil && !sendEvent(w, rc, "sample", last)) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b, open := <-v.frames:
			if !open || !sendEvent(w, rc, "sample", b) {
				return
			}
		}
	}
}

// sendEvent writes one server-sent event whose data is one line (JSON) and
// flushes it; it reports whether that worked.
func sendEvent(w http.ResponseWriter, rc *http.ResponseController, event string, data []byte) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(dashWriteTimeout)) // not every ResponseWriter has deadlines
	if _, err := w.Write([]byte("event: " + event + "\ndata: ")); err != nil {
		return false
	}
	if _, err := w.Write(data); err != nil {
		return false
	}
	if _, err := w.Write([]byte("\n\n")); err != nil {
		return false
	}
	return rc.Flush() == nil
}

func pageHeaders(w http.ResponseWriter, csp string) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// scriptDigest returns the CSP source of the one inline script of page.
func scriptDigest(page []byte) string {
	_, rest, _ := bytes.Cut(page, []byte("<script>"))
	script, _, _ := bytes.Cut(rest, []byte("</script>"))
	sum := sha256.Sum256(script)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}
