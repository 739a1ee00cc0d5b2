package http1

import "testing"

func TestBareLF(t *testing.T) {
	for b, want := range map[string]bool{
		"GET / HTTP/1.1\nHost: x\n\n": true, "GET / HTTP/1.1\r\nHost: x\n": true, "GET / HTTP/1.1\r\nHost: x\r\n\n": true,
		"GET /\n": true, "GET / HTTP/1.1\r\nX: a\nb\r\n": true,
		"GET / HTTP/1.1\r\nHost: x\r\n": false, "GET / HTTP/1.1\r\nHost: x\r": false, "\r\nGET / HTTP/1.1\r\n": false,
		"\nGET / HTTP/1.1\r\nHost": false, "GET / HT": false, "": false, "\n": false,
	} {
		if got := BareLF([]byte(b)); got != want {
			t.Errorf("BareLF(%q) = %v, want %v", b, got, want)
		}
	}
}
