package http1

import (
	"strings"
	"testing"
)

// TestAppendRequestHTTPS checks X-Forwarded-Proto for a client that came
// over TLS: https, unless a trusted proxy said otherwise.
func TestAppendRequestHTTPS(t *testing.T) {
	for _, tt := range []struct {
		req     string
		trusted bool
		want    string
	}{
		{"GET / HTTP/1.1\nHost: a\n\n", false, "X-Forwarded-Proto: https\r\n"},
		{"GET / HTTP/1.1\nHost: a\nX-Forwarded-Proto: http\n\n", false, "X-Forwarded-Proto: https\r\n"},
		{"GET / HTTP/1.1\nHost: a\nX-Forwarded-Proto: http\n\n", true, "X-Forwarded-Proto: http\r\n"},
	} {
		var h Request
		if !ParseRequest(crlf(tt.req), &h) {
			t.Fatalf("%q refused", tt.req)
		}
		got := string(AppendRequest(nil, &h, &Forward{Addr: "u:1", XFF: []byte("1.2.3.4"), ID: []byte("id"), Trusted: tt.trusted, HTTPS: true}, nil))
		if !strings.Contains(got, tt.want) || strings.Count(got, "X-Forwarded-Proto") != 1 {
			t.Errorf("%q (trusted %v): upstream request\n%q\nwant one %q", tt.req, tt.trusted, got, tt.want)
		}
	}
}
