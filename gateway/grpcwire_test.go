package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/answer"
)

func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/grpc;charset=utf-8": true,
		"application/grpc-web": false, "application/grpcx": false, "application/json": false, "": false,
	} {
		if got := isGRPC(ct); got != want {
			t.Errorf("isGRPC(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestParseGRPCTimeout(t *testing.T) {
	cases := []struct {
		v  string
		d  time.Duration
		ok bool
	}{
		{"1H", time.Hour, true}, {"2M", 2 * time.Minute, true}, {"3S", 3 * time.Second, true},
		{"250m", 250 * time.Millisecond, true}, {"7u", 7 * time.Microsecond, true}, {"99999999n", 99999999, true},
		{"0m", 0, true}, {"99999999H", maxGRPCTimeout, true},
		{"", 0, false}, {"m", 0, false}, {"10", 0, false}, {"10s", 0, false}, {"123456789m", 0, false},
		{"-1S", 0, false}, {"+1S", 0, false}, {"1.5S", 0, false}, {" 1S", 0, false},
	}
	for _, c := range cases {
		d, ok := parseGRPCTimeout(c.v)
		if d != c.d || ok != c.ok {
			t.Errorf("parseGRPCTimeout(%q) = %v, %v; want %v, %v", c.v, d, ok, c.d, c.ok)
		}
	}
}

func TestFormatGRPCTimeoutRoundsUp(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 999, 99999999, 100000001, 1500 * time.Millisecond, 3*time.Hour + 1, 200 * 24 * time.Hour, maxGRPCTimeout - time.Hour} {
		v := formatGRPCTimeout(d)
		got, ok := parseGRPCTimeout(v)
		// The finest unit that fits eight digits is off by less than 1/10^5.
		if !ok || got < d || got-d > got/100000+1 {
			t.Errorf("formatGRPCTimeout(%v) = %q, read back as %v, %v", d, v, got, ok)
		}
	}
	if v := formatGRPCTimeout(1500 * time.Millisecond); v != "1500000u" {
		t.Errorf("formatGRPCTimeout(1.5s) = %q, want the finest unit in eight digits, 1500000u", v)
	}
}

func TestGRPCMessageEncoding(t *testing.T) {
	for plain, enc := range map[string]string{"ok": "ok", "100% sure": "100%25 sure", "é\n": "%C3%A9%0A"} {
		if got := encodeGRPCMessage(plain); got != enc {
			t.Errorf("encode(%q) = %q, want %q", plain, got, enc)
		}
		if got := decodeGRPCMessage(enc); got != plain {
			t.Errorf("decode(%q) = %q, want %q", enc, got, plain)
		}
	}
	if got := decodeGRPCMessage("50%zz%4"); got != "50%zz%4" {
		t.Errorf("a malformed escape changed: %q", got)
	}
}

func TestWriteGRPCErrorIsTrailersOnly(t *testing.T) {
	cases := []struct {
		err    error
		code   string
		reason string
		push   string
		retry  string
	}{
		{&sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: 1500 * time.Millisecond}, "8", "rate_limited", "1500", "2"},
		{&sluice.Rejection{Reason: sluice.CircuitOpen}, "14", "circuit_open", "1000", "1"},
		{&sluice.Rejection{Reason: sluice.Overloaded}, "14", "overloaded", "1000", "1"},
		{sluice.ErrTimeout, "4", "timeout", "", ""},
		{&UpstreamError{Target: "http://127.0.0.1:1", Connect: true, Err: errors.New("connection refused")}, "14", "upstream_unreachable", "", ""},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		reason := writeGRPCError(w, c.err)
		h := w.Result().Header
		if w.Code != http.StatusOK || h.Get("Content-Type") != "application/grpc" || w.Body.Len() != 0 {
			t.Errorf("%v: status %d, content type %q, %d body bytes; want 200, application/grpc, none", c.err, w.Code, h.Get("Content-Type"), w.Body.Len())
		}
		if h.Get("Grpc-Status") != c.code || reason != c.reason || h.Get("Grpc-Message") == "" {
			t.Errorf("%v: grpc-status %q (%q), reason %q; want %s, %q", c.err, h.Get("Grpc-Status"), h.Get("Grpc-Message"), reason, c.code, c.reason)
		}
		if h.Get("Grpc-Retry-Pushback-Ms") != c.push || h.Get("Retry-After") != c.retry {
			t.Errorf("%v: pushback %q, Retry-After %q; want %q, %q", c.err, h.Get("Grpc-Retry-Pushback-Ms"), h.Get("Retry-After"), c.push, c.retry)
		}
	}
}

func TestGRPCStatusReadsTrailersThenHeaders(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name            string
		header, trailer http.Header
		code            codes.Code // OK: no error
		retry           time.Duration
	}{
		{"ok in trailers", hdr(), hdr("Grpc-Status", "0"), codes.OK, 0},
		{"not found is no failure", hdr(), hdr("Grpc-Status", "5"), codes.OK, 0},
		{"invalid argument is no failure", hdr("Grpc-Status", "3"), hdr(), codes.OK, 0},
		{"unavailable in trailers", hdr(), hdr("Grpc-Status", "14", "Grpc-Message", "down%21", "Grpc-Retry-Pushback-Ms", "250"), codes.Unavailable, 250 * time.Millisecond},
		{"trailers-only internal", hdr("Grpc-Status", "13", "Retry-After", "3"), hdr(), codes.Internal, 3 * time.Second},
		{"resource exhausted", hdr(), hdr("Grpc-Status", "8"), codes.ResourceExhausted, 0},
		{"deadline", hdr(), hdr("Grpc-Status", "4"), codes.DeadlineExceeded, 0},
		{"no status", hdr(), hdr(), codes.Internal, 0},
	}
	for _, c := range cases {
		err := grpcStatus(c.header, c.trailer)
		var ge *answer.GRPCStatusError
		switch {
		case c.code == codes.OK && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.code != codes.OK && (!errors.As(err, &ge) || ge.Code != c.code || ge.RetryAfter != c.retry):
			t.Errorf("%s: %#v, want code %v retry %v", c.name, err, c.code, c.retry)
		}
	}
	if err := grpcStatus(hdr(), hdr("Grpc-Status", "14", "Grpc-Message", "down%21")); err.(*answer.GRPCStatusError).Message != "down!" {
		t.Errorf("message %q, want it percent-decoded", err.(*answer.GRPCStatusError).Message)
	}
}

func TestGRPCMethodsIdempotent(t *testing.T) {
	m := newGRPCMethods(&config.GRPC{Idempotent: []string{"/pkg.Svc/Get", "/pkg.Read/*"}})
	for path, want := range map[string]bool{
		"/pkg.Svc/Get": true, "/pkg.Svc/Put": false, "/pkg.Read/Any": true, "/pkg.Reader/Any": false,
		"/pkg.Svc/Get/x": false, "/": false, "": false,
	} {
		if got := m.idempotent(path); got != want {
			t.Errorf("idempotent(%q) = %v, want %v", path, got, want)
		}
	}
	if newGRPCMethods(nil).idempotent("/pkg.Svc/Get") {
		t.Error("a route without grpc settings retries a call")
	}
}
