package http1

import "testing"

func TestForwardedAddr(t *testing.T) {
	for entry, want := range map[string]string{
		"192.0.2.1":            "192.0.2.1",
		" 192.0.2.1\t":         "192.0.2.1",
		"192.0.2.1:4711":       "192.0.2.1",
		"2001:db8::1":          "2001:db8::1",
		"[2001:db8::1]:4711":   "2001:db8::1",
		"[2001:db8::1]":        "2001:db8::1",
		"::ffff:192.0.2.1":     "192.0.2.1",
		"[::ffff:192.0.2.1]:1": "192.0.2.1",
		"fe80::1%eth0":         "fe80::1%eth0",
		"unknown":              "",
		"_hidden":              "",
		"":                     "",
		"192.0.2.1:99999":      "",
		"192.0.2.1:":           "",
		"[192.0.2.1]":          "",
		"[192.0.2.1]:1":        "",
		"[2001:db8::1":         "",
		"example.com":          "",
		"example.com:80":       "",
	} {
		a, ok := ForwardedAddr([]byte(entry))
		if got := a.String(); ok != (want != "") || ok && got != want {
			t.Errorf("ForwardedAddr(%q) = %s, %v; want %q", entry, got, ok, want)
		}
	}
}

func TestForwardedHeaderAndClaim(t *testing.T) {
	for name, want := range map[string][2]bool{ // ForwardedHeader, ForwardedClaim
		"X-Forwarded-For": {true, false}, "x_forwarded_host": {true, false}, "Forwarded": {true, false},
		"X-Real-IP": {true, false}, "x_real_ip": {true, false},
		"X-Forwarded-Port": {false, true}, "X_Forwarded_Prefix": {false, true}, "x-forwarded-ssl": {false, true},
		"X-Forwarded-": {false, false}, "X-Forwarded": {false, false}, "X-Forwarder-Port": {false, false}, "X-Request-Id": {false, false},
	} {
		if got := [2]bool{ForwardedHeader([]byte(name)), ForwardedClaim([]byte(name))}; got != want {
			t.Errorf("%s: ForwardedHeader, ForwardedClaim = %v, want %v", name, got, want)
		}
	}
}

func TestClaimsForwarded(t *testing.T) {
	for lines, want := range map[string]bool{
		"Host: a\r\n\r\n": false, "Host: a\r\nX-Forwarded-For: b\r\n\r\n": false,
		"Host: a\r\nX-Forwarded-Proto: https\r\n\r\n": true, "Host: a\r\nX-Forwarded-Port: 1\r\n\r\n": true,
	} {
		var h Request
		if !ParseRequest([]byte("GET / HTTP/1.1\r\n"+lines), &h) {
			t.Fatalf("%q: not plain", lines)
		}
		if got := h.ClaimsForwarded(); got != want {
			t.Errorf("%q: ClaimsForwarded() = %v, want %v", lines, got, want)
		}
	}
}
