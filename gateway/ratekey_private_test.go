package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/http1"
	"github.com/valyala/fasthttp"
)

// keyReaders parses the request head (LF line ends) with each engine's
// reader: fasthttp's for the goroutine engine (and, through toFast, the
// HTTP/2 one), http1.Request for the loops, net/http's for gRPC and the TLS
// listener's WebSockets.
func keyReaders(t *testing.T, head string) map[string]request {
	t.Helper()
	raw := []byte(strings.ReplaceAll(head, "\n", "\r\n"))
	var fr fasthttp.Request
	if err := fr.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
		t.Fatalf("fasthttp: %.80q: %v", head, err)
	}
	var h http1.Request
	if !http1.ParseRequest(raw, &h) {
		t.Fatalf("http1.Request: %.80q: refused", head)
	}
	sr, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("net/http: %.80q: %v", head, err)
	}
	return map[string]request{"goroutine": fastRequest{&fr}, "loop": &h, "net/http": stdRequest{sr}}
}

// TestRateLimitKeyValue checks, for every engine's request reader, which
// value of a request's key header keys it, and which requests are refused
// as ambiguous: the header on two field lines (in any case, or with '_'
// for '-'), or a comma list. (The first line's value was the key: a client
// that sent a fresh value before its real key was never limited.)
func TestRateLimitKeyValue(t *testing.T) {
	l := &rateLimit{header: "X-Api-Key", names: http1.CGINames("X-Api-Key")}
	long := strings.Repeat("k", 2048)
	for _, tt := range []struct {
		lines []string
		want  string
		ok    bool
	}{
		{nil, "", true},
		{[]string{"X-Api-Key: real"}, "real", true},
		{[]string{"x-api-key: real"}, "real", true},
		{[]string{"X-API-KEY: \treal \t"}, "real", true},
		{[]string{"X_Api_Key: real"}, "real", true},
		{[]string{"x-api_key: real"}, "real", true},
		{[]string{"X-Api-Key:"}, "", true},
		{[]string{"X-Api-Key: " + long}, long, true},
		{[]string{"X-Api-Key: fresh", "X-Api-Key: real"}, "", false},
		{[]string{"X-Api-Key: real", "x-api-key: real"}, "", false},
		{[]string{"X-Api-Key: fresh", "X_Api_Key: real"}, "", false},
		{[]string{"x_api-key: fresh", "X-Api_Key: real"}, "", false},
		{[]string{"X-Api-Key:", "X-Api-Key: real"}, "", false},
		{[]string{"X-Api-Key: fresh, real"}, "", false},
		{[]string{"X-Api-Key: ,real"}, "", false},
	} {
		// See TestRateLimitKeyValueOneValue for the headers that are no list.
		head := "GET / HTTP/1.1\nHost: a:1\n" + strings.Join(append(tt.lines, "Accept: */*"), "\n") + "\n\n"
		for name, req := range keyReaders(t, head) {
			v, ok := l.keyValue(req)
			if ok != tt.ok || string(v) != tt.want {
				t.Errorf("%s: %.80q: key value %.20q, %v; want %.20q, %v", name, tt.lines, v, ok, tt.want, tt.ok)
			}
		}
	}
}

// TestRateLimitKeyValueOneValue: a key header that is no list (see
// http1.OneValue) is keyed by its whole value, commas and all, on every
// engine's reader; two lines of it are still refused.
func TestRateLimitKeyValueOneValue(t *testing.T) {
	l := &rateLimit{header: "Authorization", names: http1.CGINames("Authorization"), one: true}
	digest := `Digest username="a", realm="r"`
	for _, tt := range []struct {
		lines []string
		want  string
		ok    bool
	}{
		{[]string{"Authorization: " + digest}, digest, true},
		{[]string{"authorization:  " + digest + " "}, digest, true},
		{[]string{"Authorization: " + digest, "Authorization: Basic eA=="}, "", false},
	} {
		head := "GET / HTTP/1.1\nHost: a:1\n" + strings.Join(tt.lines, "\n") + "\n\n"
		for name, req := range keyReaders(t, head) {
			if v, ok := l.keyValue(req); ok != tt.ok || string(v) != tt.want {
				t.Errorf("%s: %q: key value %q, %v; want %q, %v", name, tt.lines, v, ok, tt.want, tt.ok)
			}
		}
	}
}

// TestRateLimitKeyValueAllocates checks that reading a single key header
// allocates nothing on the loops' and the goroutine engine's requests.
func TestRateLimitKeyValueAllocates(t *testing.T) {
	l := &rateLimit{header: "X-Api-Key", names: http1.CGINames("X-Api-Key")}
	reqs := keyReaders(t, "GET / HTTP/1.1\nHost: a:1\nAccept: */*\nX-Api-Key: real\nUser-Agent: x\n\n")
	for _, name := range []string{"goroutine", "loop"} {
		if n := testing.AllocsPerRun(10, func() { l.keyValue(reqs[name]) }); n != 0 {
			t.Errorf("%s: %v allocations, want none", name, n)
		}
	}
}

// TestRateLimitKeySize checks that a key does not grow with its header's
// value: a value longer than maxKeyValue is keyed by its digest, distinct
// from any value's own key. (Keys were as long as the header, up to
// server.max_header_bytes, in every store, Redis included.)
func TestRateLimitKeySize(t *testing.T) {
	l := &rateLimit{header: "X-Api-Key", names: http1.CGINames("X-Api-Key")}
	rt := &route{name: "r"}
	keys := map[string]string{}
	long := strings.Repeat("k", 16<<10)
	for _, v := range []string{"", "real", strings.Repeat("k", maxKeyValue), long, long[1:] + "x", long + "k"} {
		k := l.key([]byte(v), rt, netip.Addr{})
		if max := len("r|h|") + max(maxKeyValue, sha256.Size); len(k) > max {
			t.Errorf("value of %d bytes: key of %d bytes, want at most %d", len(v), len(k), max)
		}
		if prev, dup := keys[k]; dup {
			t.Errorf("values %.20q and %.20q have one key", prev, v)
		}
		keys[k] = v
	}
	digest := sha256.Sum256([]byte(long))
	if k := l.key(digest[:], rt, netip.Addr{}); keys[k] != "" || k == l.key([]byte(long), rt, netip.Addr{}) {
		t.Errorf("a value that is another's digest has its key")
	}
}

// TestCGINames checks the names a key header is read under.
func TestCGINames(t *testing.T) {
	got := http1.CGINames("X-Api_Key")
	slices.Sort(got)
	want := []string{"X-Api-Key", "X-Api_Key", "X_Api-Key", "X_Api_Key"}
	if !slices.Equal(got, want) {
		t.Errorf("http1.CGINames(X-Api_Key) = %q, want %q", got, want)
	}
	if got := http1.CGINames("Tenant"); !slices.Equal(got, []string{"Tenant"}) {
		t.Errorf("http1.CGINames(Tenant) = %q", got)
	}
}

// TestRateLimitClientKey checks how key: ip writes a client's address.
func TestRateLimitClientKey(t *testing.T) {
	for _, tt := range []struct {
		bits       int
		addr, want string
	}{
		{64, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{48, "2001:db8:1:2:3:4:5:6", "2001:db8:1::/48"},
		{128, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"},
		{0, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"},
		{64, "fe80::1%eth0", "fe80::/64"},
		{128, "fe80::1%eth0", "fe80::1"},
		{64, "10.1.2.3", "10.1.2.3"},
		{64, "::ffff:10.1.2.3", "10.1.2.3"},
		{64, "", ""}, // not a TCP peer: the zero Addr
	} {
		var a netip.Addr
		if tt.addr != "" {
			a = netip.MustParseAddr(tt.addr)
		}
		l := &rateLimit{v6bits: tt.bits}
		if got := string(l.appendClient(nil, a)); got != tt.want {
			t.Errorf("/%d: %s keyed as %q, want %q", tt.bits, tt.addr, got, tt.want)
		}
	}
}
