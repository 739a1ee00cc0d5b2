package http1

import "testing"

func TestIsHop(t *testing.T) {
	for _, h := range HopHeaders {
		if !IsHop([]byte(h), nil) {
			t.Errorf("%s not hop-by-hop", h)
		}
	}
	for _, c := range []struct {
		k, connection string
		want          bool
	}{
		{"te", "", true}, {"KEEP-ALIVE", "", true},
		{"Accept", "", false}, {"Content-Type", "keep-alive", false},
		{"X-Secret", "keep-alive, x-secret", true},
		// Content-Length and Host stay, whatever Connection names.
		{"Content-Length", "Content-Length", false}, {"host", "close, Host", false},
	} {
		if got := IsHop([]byte(c.k), []byte(c.connection)); got != c.want {
			t.Errorf("IsHop(%q, %q) = %v, want %v", c.k, c.connection, got, c.want)
		}
	}
}
