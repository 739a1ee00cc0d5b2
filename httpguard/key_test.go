package httpguard_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/httpguard"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name    string
		remote  string
		xff     []string // X-Forwarded-For header lines
		trusted []netip.Prefix
		want    string
	}{
		{"no proxy", "203.0.113.7:4711", nil, trusted, "203.0.113.7"},
		{"untrusted peer's XFF ignored", "203.0.113.7:4711", []string{"198.51.100.1"}, trusted, "203.0.113.7"},
		{"no trusted proxies: XFF ignored", "10.0.0.1:4711", []string{"198.51.100.1"}, nil, "10.0.0.1"},
		{"trusted peer", "10.0.0.1:4711", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"right-most untrusted", "10.0.0.1:4711", []string{"192.0.2.66, 198.51.100.1, 10.0.0.2"}, trusted, "198.51.100.1"},
		{"forged left entries ignored", "10.0.0.1:4711", []string{"1.1.1.1", "198.51.100.1"}, trusted, "198.51.100.1"},
		{"lines read as one list", "10.0.0.1:4711", []string{"198.51.100.1", "10.0.0.3"}, trusted, "198.51.100.1"},
		{"garbage stops at the proxy that added it", "10.0.0.1:4711", []string{"198.51.100.1, junk, 10.0.0.2"}, trusted, "10.0.0.2"},
		{"all trusted: left-most", "10.0.0.1:4711", []string{"10.0.0.9, 10.0.0.2"}, trusted, "10.0.0.9"},
		{"trusted peer, no XFF", "10.0.0.1:4711", nil, trusted, "10.0.0.1"},
		{"IPv6 peer", "[::1]:4711", []string{"2001:db8::7"}, trusted, "2001:db8::7"},
		{"mapped IPv4 unmapped", "[::ffff:10.0.0.1]:4711", []string{"::ffff:198.51.100.1"}, trusted, "198.51.100.1"},
		{"no port", "203.0.113.7", nil, trusted, "203.0.113.7"},
		// Some proxies write ports: the address is the client's (it was
		// no address, and every client was the proxy).
		{"entry with a port", "10.0.0.1:4711", []string{"198.51.100.1:1234"}, trusted, "198.51.100.1"},
		{"IPv6 entry with a port", "10.0.0.1:4711", []string{"[2001:db8::7]:1234"}, trusted, "2001:db8::7"},
		{"IPv6 entry in brackets", "10.0.0.1:4711", []string{"[2001:db8::7]"}, trusted, "2001:db8::7"},
		{"trusted entry with a port", "10.0.0.1:4711", []string{"198.51.100.1, 10.0.0.2:80"}, trusted, "198.51.100.1"},
		{"unknown: the proxy", "10.0.0.1:4711", []string{"198.51.100.1, unknown"}, trusted, "10.0.0.1"},
		{"not an address", "@unix", nil, trusted, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := httpguard.ClientIP(r, tt.trusted).String(); got != tt.want {
				t.Errorf("ClientIP = %s, want %s", got, tt.want)
			}
			wantKey := tt.want
			if wantKey == "invalid IP" {
				wantKey = ""
			} else if a := netip.MustParseAddr(wantKey); a.Is6() {
				wantKey = netip.PrefixFrom(a, 64).Masked().String() // see TestByClientIPIPv6Block
			}
			if got := httpguard.ByClientIP(tt.trusted...)(r); got != wantKey {
				t.Errorf("ByClientIP key = %q, want %q", got, wantKey)
			}
		})
	}
}

// keyedServer serves ok behind a rate limit of one request per hour per key
// (on a fake clock that never moves), keyed by key.
func keyedServer(t *testing.T, key func(*http.Request) string) *httptest.Server {
	t.Helper()
	lim, err := ratelimit.New(ratelimit.Options{
		Name:  "per-client",
		Limit: ratelimit.Limit{Limit: 1, Period: time.Hour},
		Clock: clock.NewFake(time.Time{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	mw := httpguard.Middleware(sluice.New(lim), httpguard.Options{Key: key})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	return srv
}

type keyStep struct {
	header, value string
	code          int
}

func runKeySteps(t *testing.T, url string, steps []keyStep) {
	t.Helper()
	for i, s := range steps {
		req, _ := http.NewRequest("GET", url, nil)
		if s.value != "" {
			req.Header.Set(s.header, s.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if resp.StatusCode != s.code {
			t.Errorf("step %d (%s: %q): status %d, want %d", i, s.header, s.value, resp.StatusCode, s.code)
		}
	}
}

// Per-client limits from outside: behind a trusted proxy (the test client
// on loopback plays it), each client address in X-Forwarded-For has its
// own limit; without trusted proxies, every request counts against the
// peer.
func TestMiddlewareKeyByClientIP(t *testing.T) {
	const xff = "X-Forwarded-For"
	t.Run("trusted proxy", func(t *testing.T) {
		srv := keyedServer(t, httpguard.ByClientIP(netip.MustParsePrefix("127.0.0.0/8")))
		runKeySteps(t, srv.URL, []keyStep{
			{xff, "203.0.113.1", 200},
			{xff, "203.0.113.1", 429},
			{xff, "203.0.113.2", 200},
			{xff, "192.0.2.9, 203.0.113.2", 429}, // a forged entry on the left changes nothing
			{xff, "203.0.113.3, 127.0.0.1", 200}, // a second trusted hop is skipped
			{xff, "", 200},                       // no XFF: the proxy itself
			{xff, "", 429},
		})
	})
	t.Run("no trusted proxy", func(t *testing.T) {
		srv := keyedServer(t, httpguard.ByClientIP())
		runKeySteps(t, srv.URL, []keyStep{
			{xff, "203.0.113.1", 200},
			{xff, "203.0.113.2", 429}, // the peer is the client: XFF is not believed
		})
	})
}

func TestMiddlewareKeyByHeader(t *testing.T) {
	const h = "X-Api-Key"
	srv := keyedServer(t, httpguard.ByHeader("x-api-key"))
	runKeySteps(t, srv.URL, []keyStep{
		{h, "a", 200}, {h, "a", 429}, {h, "b", 200}, {h, "", 200}, {h, "", 429},
	})
}

// One limiter keyed by the mux's pattern: each route has its own limit.
func TestMiddlewareKeyByPattern(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.Options{
		Name:  "per-route",
		Limit: ratelimit.Limit{Limit: 1, Period: time.Hour},
		Clock: clock.NewFake(time.Time{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	mw := httpguard.Middleware(sluice.New(lim), httpguard.Options{Key: httpguard.ByPattern})
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", mw(ok))
	mux.Handle("/orders/", mw(ok))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for i, s := range []struct {
		path string
		code int
	}{
		{"/items/1", 200}, {"/items/2", 429}, {"/orders/7", 200}, {"/orders/8", 429},
	} {
		resp, err := http.Get(srv.URL + s.path)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if resp.StatusCode != s.code {
			t.Errorf("step %d %s: status %d, want %d", i, s.path, resp.StatusCode, s.code)
		}
		if s.code == 429 && resp.Header.Get("RateLimit-Policy") != `"per-route";q=1;w=3600` {
			t.Errorf("step %d: RateLimit-Policy %q", i, resp.Header.Get("RateLimit-Policy"))
		}
	}
}

// The 429 of a real limiter speaks the gateway's vocabulary: Retry-After,
// the JSON body, and RateLimit headers whose policy name is a valid
// structured-field string whatever the limiter's name holds.
func TestMiddlewareRateLimitAnswer(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.Options{
		Name:  "tenant \"a\\b\"\n",
		Limit: ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Minute},
		Clock: clock.NewFake(time.Time{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpguard.Middleware(sluice.New(lim), httpguard.Options{Key: httpguard.ByClientIP()})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	var resp *http.Response
	for range 2 {
		if resp, err = http.Get(srv.URL); err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	want := map[string]string{
		"Retry-After":      "60",
		"Content-Type":     "application/json",
		"RateLimit-Policy": `"tenant \"a\\b\"";q=1;w=60`,
		"RateLimit":        `"tenant \"a\\b\"";r=0;t=60`,
	}
	if resp.StatusCode != 429 {
		t.Fatalf("status %d, want 429", resp.StatusCode)
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// clientFrom returns a client whose connections leave from the loopback
// address ip.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Without a Key, each client address has its own limit, as the gateway's
// default key: ip.
func TestMiddlewareDefaultKeyIsClientIP(t *testing.T) {
	srv := keyedServer(t, nil)
	for i, s := range []struct {
		from string
		code int
	}{
		{"127.0.0.1", 200}, {"127.0.0.1", 429}, {"127.0.0.2", 200}, {"127.0.0.2", 429},
	} {
		resp, err := clientFrom(t, s.from).Get(srv.URL)
		if err != nil {
			t.Skipf("cannot send from %s: %v", s.from, err)
		}
		readAll(t, resp)
		if resp.StatusCode != s.code {
			t.Errorf("step %d from %s: status %d, want %d", i, s.from, resp.StatusCode, s.code)
		}
	}
}

// Admitted requests carry the limiter's RateLimit headers too, as the
// gateway's answers do (see the gateway's TestRateLimit): one line each,
// the quota counting down.
func TestMiddlewareRateLimitHeadersOnAdmitted(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.Options{
		Name:  "rl",
		Limit: ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Limit: 3, Period: time.Minute},
		Clock: clock.NewFake(time.Time{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpguard.Middleware(sluice.New(lim), httpguard.Options{})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })))
	defer srv.Close()
	for i, want := range []struct {
		code      int
		rateLimit string
	}{
		{200, `"rl";r=2;t=60`}, {200, `"rl";r=1;t=60`}, {200, `"rl";r=0;t=60`}, {429, `"rl";r=0;t=60`},
	} {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if resp.StatusCode != want.code {
			t.Errorf("request %d: status %d, want %d", i, resp.StatusCode, want.code)
		}
		if got := resp.Header.Values("RateLimit-Policy"); len(got) != 1 || got[0] != `"rl";q=3;w=60` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
		if got := resp.Header.Values("RateLimit"); len(got) != 1 || got[0] != want.rateLimit {
			t.Errorf("request %d: RateLimit %q, want %q", i, got, want.rateLimit)
		}
	}
}

// TestByClientIPIPv6Block: ByClientIP keys an IPv6 client by its /64, as
// the gateway's `key: ip` does (rate_limit.ipv6_prefix), so that a client
// given a block of addresses does not take a fresh limit with each of
// them; an IPv4 client by its address. (Each IPv6 address was a key.)
func TestByClientIPIPv6Block(t *testing.T) {
	trusted := netip.MustParsePrefix("10.0.0.0/8")
	key := httpguard.ByClientIP(trusted)
	keyOf := func(remote, xff string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		return key(r)
	}
	same := [][2]string{
		{"[2001:db8:1:2::7]:1", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:2"},
		{"[2001:db8:1:2::7]:1", "[2001:db8:1:2::7%eth0]:1"},
		{"10.0.0.1:1 2001:db8:1:2::1", "[2001:db8:1:2::9]:1"},
	}
	for _, p := range same {
		a, b := keyOf(split(p[0])), keyOf(split(p[1]))
		if a != b || a == "" {
			t.Errorf("%s and %s: keys %q and %q, want one", p[0], p[1], a, b)
		}
	}
	if got := keyOf("[2001:db8:1:2::7]:1", ""); got != "2001:db8:1:2::/64" {
		t.Errorf("key %q, want 2001:db8:1:2::/64", got)
	}
	if a, b := keyOf("[2001:db8:1:2::7]:1", ""), keyOf("[2001:db8:1:3::7]:1", ""); a == b {
		t.Errorf("two /64s share the key %q", a)
	}
	if got := keyOf("192.0.2.7:1", ""); got != "192.0.2.7" {
		t.Errorf("IPv4 key %q, want the address", got)
	}
}

// split reads "peer xff" as a peer address and an X-Forwarded-For value.
func split(s string) (string, string) {
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// TestByClientIPPrefix: ByClientIPPrefix keys an IPv6 client by the prefix
// asked for (128: the address), and refuses one outside 32 to 128.
func TestByClientIPPrefix(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:3::7]:1"
	for bits, want := range map[int]string{48: "2001:db8:1::/48", 80: "2001:db8:1:2:3::/80", 128: "2001:db8:1:2:3::7"} {
		key, err := httpguard.ByClientIPPrefix(bits)
		if err != nil {
			t.Fatal(err)
		}
		if got := key(r); got != want {
			t.Errorf("/%d: key %q, want %q", bits, got, want)
		}
	}
	for _, bits := range []int{0, 31, 129, -1} {
		if _, err := httpguard.ByClientIPPrefix(bits); !errors.Is(err, sluice.ErrInvalidOptions) {
			t.Errorf("/%d: error %v, want ErrInvalidOptions", bits, err)
		}
	}
}
