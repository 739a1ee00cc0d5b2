package http1

import (
	"net/http"
	"testing"
)

func TestRefusedHead(t *testing.T) {
	for _, c := range []struct {
		name, method, target, proto, raw string
		want                             int
	}{
		{"plain", "GET", "/", "HTTP/1.1", "Host: a\r\n\r\n", 0},
		{"HTTP/1.0", "GET", "/", "HTTP/1.0", "\r\n", 0},
		{"HTTP/1.2", "GET", "/", "HTTP/1.2", "Host: a\r\n\r\n", 0},
		{"M-SEARCH", "M-SEARCH", "/", "HTTP/1.1", "Host: a\r\n\r\n", 0},
		{"chunked", "POST", "/", "HTTP/1.1", "Host: a\r\nTransfer-Encoding: chunked\r\n\r\n", 0},
		{"double slash with Host", "GET", "//a", "HTTP/1.1", "Host: a\r\n\r\n", 0},
		{"empty method", "", "/", "HTTP/1.1", "\r\n", http.StatusBadRequest},
		{"lower-case method", "get", "/", "HTTP/1.1", "\r\n", http.StatusBadRequest},
		{"CONNECT", "CONNECT", "a:443", "HTTP/1.1", "\r\n", http.StatusMethodNotAllowed},
		{"TRACE", "TRACE", "/", "HTTP/1.1", "\r\n", http.StatusMethodNotAllowed},
		{"HTTP/2.0", "GET", "/", "HTTP/2.0", "\r\n", http.StatusHTTPVersionNotSupported},
		{"HTTP/1.x", "GET", "/", "HTTP/1.x", "\r\n", http.StatusHTTPVersionNotSupported},
		{"short version", "GET", "/", "HTTP/1", "\r\n", http.StatusHTTPVersionNotSupported},
		{"asterisk", "OPTIONS", "*", "HTTP/1.1", "\r\n", http.StatusBadRequest},
		{"bad percent", "GET", "/%zz", "HTTP/1.1", "\r\n", http.StatusBadRequest},
		{"double slash without Host", "GET", "//a", "HTTP/1.1", "X: y\r\n\r\n", http.StatusBadRequest},
		{"empty Host", "GET", "//a", "HTTP/1.1", "Host:\r\n\r\n", http.StatusBadRequest},
		{"folded line", "GET", "/", "HTTP/1.1", "X: a\r\n b\r\n\r\n", http.StatusBadRequest},
		{"bare LF empty line", "GET", "/", "HTTP/1.1", "Host: a\r\n\n", http.StatusBadRequest},
		{"gzip", "POST", "/", "HTTP/1.1", "Transfer-Encoding: gzip, chunked\r\n\r\n", http.StatusNotImplemented},
		{"two TEs", "POST", "/", "HTTP/1.1", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", http.StatusNotImplemented},
		{"TE and CL", "POST", "/", "HTTP/1.1", "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", http.StatusBadRequest},
		{"Transfer_Encoding", "POST", "/", "HTTP/1.1", "Host: a\r\nTransfer_Encoding: chunked\r\n\r\n", http.StatusBadRequest},
		{"content_length", "POST", "/", "HTTP/1.1", "Host: a\r\ncontent_length: 1\r\n\r\n", http.StatusBadRequest},
		{"absolute form", "GET", "http://a/b?c", "HTTP/1.1", "Host: A\r\n\r\n", 0},
		{"absolute form without Host", "GET", "http://a/b", "HTTP/1.0", "\r\n", 0},
		{"absolute form, another Host", "GET", "http://a/b", "HTTP/1.1", "Host: b\r\n\r\n", http.StatusBadRequest},
		{"absolute form with userinfo", "GET", "http://b@a", "HTTP/1.1", "Host: a\r\n\r\n", http.StatusBadRequest},
	} {
		if got := RefusedHead([]byte(c.method), []byte(c.target), []byte(c.proto), []byte(c.raw)); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestRefusalReason(t *testing.T) {
	for code, want := range map[int]string{
		http.StatusBadRequest: "bad_request", http.StatusMethodNotAllowed: "method_not_allowed",
		http.StatusNotImplemented: "not_implemented", http.StatusHTTPVersionNotSupported: "version_not_supported",
	} {
		if got := RefusalReason(code); got != want {
			t.Errorf("RefusalReason(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestAbsoluteAuthority(t *testing.T) {
	for target, want := range map[string]string{
		"http://a/b": "a", "https://a:1?q": "a:1", "http://u@a#f": "u@a", "http://": "",
		"/a://b": "-", "*": "-", "a:1": "-", "://a": "-",
	} {
		got, ok := absoluteAuthority([]byte(target))
		if !ok {
			got = []byte("-")
		}
		if string(got) != want {
			t.Errorf("absoluteAuthority(%q) = %q, want %q", target, got, want)
		}
	}
}

func TestValidHost(t *testing.T) {
	for v, want := range map[string]bool{
		"": true, "a": true, "a.b-c_d~": true, "a:80": true, "a:": true, "[::1]": true, "[::1]:8080": true,
		"1.2.3.4:5": true, "a%2Fb": true, "a!$&'()*+,;=": true,
		"a@b": false, "a\"b": false, "a b": false, "a/b": false, "a\\b": false, "a:b": false, "a:1:2": false,
		"[::1": false, "[]": false, "[::1]x": false, "[::g]": false, "a%2": false, "a<b>": false, "a{b}": false,
	} {
		if got := ValidHost([]byte(v)); got != want {
			t.Errorf("ValidHost(%q) = %v, want %v", v, got, want)
		}
	}
}
