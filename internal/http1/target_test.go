package http1

import "testing"

func TestPlainPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/a/b/": true, "/.well-known/x": true, "/a:b@c;d=e": true, "/a..b": true,
		"": false, "a": false, "//a": false, "/a//b": false, "/./a": false, "/a/..": false, "/a/../b": false,
		"/%41": false, "/a?b": false, "/a#b": false, "/a\\b": false, "/a b": false,
	} {
		if got := PlainPath([]byte(p)); got != want {
			t.Errorf("PlainPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestPlainHost(t *testing.T) {
	for h, want := range map[string]bool{
		"a": true, "a:80": true, "127.0.0.1:8080": true, "[::1]": true, "[::1]:8080": true, "my_host.example": true,
		"": false, ":80": false, "a:": false, "a:x": false, "a:1234567": false, "[]": false, "[zz]": false,
		"[::1]x": false, "a#b": false, "a b": false, "[::1": false,
	} {
		if got := PlainHost([]byte(h)); got != want {
			t.Errorf("PlainHost(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestPlainQueryAndPercentEncoded(t *testing.T) {
	for q, want := range map[string]bool{"": true, "a=1&b=%20": true, "x?y": true, "a b": false, "a#b": false, "a\"b": false} {
		if got := PlainQuery([]byte(q)); got != want {
			t.Errorf("PlainQuery(%q) = %v, want %v", q, got, want)
		}
	}
	for target, want := range map[string]bool{"/": true, "/%41%6a": true, "/a?b=%2F": true, "/%": false, "/%4": false, "/%zz": false, "/%41%": false} {
		if got := PercentEncoded([]byte(target)); got != want {
			t.Errorf("PercentEncoded(%q) = %v, want %v", target, got, want)
		}
	}
}
