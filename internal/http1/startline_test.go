package http1

import (
	"bytes"
	"strconv"
	"testing"
)

func TestPlainRequestLine(t *testing.T) {
	method, target, path, rest, ok := PlainRequestLine(crlf("POST /v1/infer?model=a%20b HTTP/1.1\nHost: a\n\n"))
	if !ok || string(method) != "POST" || string(target) != "/v1/infer?model=a%20b" || string(path) != "/v1/infer" ||
		string(rest) != "Host: a\r\n\r\n" {
		t.Errorf("ok %v: method %q target %q path %q rest %q", ok, method, target, path, rest)
	}
	for name, line := range map[string]string{
		"HTTP/1.0":          "GET / HTTP/1.0\r\n",
		"HTTP/1.1 bare LF":  "GET / HTTP/1.1\n",
		"absolute form":     "GET http://a/ HTTP/1.1\r\n",
		"asterisk":          "OPTIONS * HTTP/1.1\r\n",
		"percent in path":   "GET /%65 HTTP/1.1\r\n",
		"dot segment":       "GET /x/../y HTTP/1.1\r\n",
		"fragment":          "GET /x#y HTTP/1.1\r\n",
		"space in query":    "GET /x?a b HTTP/1.1\r\n",
		"lower-case method": "get / HTTP/1.1\r\n",
		"M-SEARCH":          "M-SEARCH / HTTP/1.1\r\n",
		"TRACE":             "TRACE / HTTP/1.1\r\n",
		"no method":         " / HTTP/1.1\r\n",
		"no target":         "GET  HTTP/1.1\r\n",
		"no version":        "GET /\r\n",
	} {
		if _, _, _, _, ok := PlainRequestLine([]byte(line)); ok {
			t.Errorf("%s: taken as plain", name)
		}
	}
}

func TestPlainStatusLine(t *testing.T) {
	for line, want := range map[string]string{"HTTP/1.1 200 OK\r\nX: y\r\n\r\n": "HTTP/1.1 200 OK", "HTTP/1.1 204\r\n\r\n": "HTTP/1.1 204"} {
		status, code, rest, ok := PlainStatusLine([]byte(line))
		if !ok || string(status) != want || code != int(want[9]-'0')*100+int(want[10]-'0')*10+int(want[11]-'0') ||
			string(status)+"\r\n"+string(rest) != line {
			t.Errorf("%q: ok %v status %q code %d rest %q", line, ok, status, code, rest)
		}
	}
	for name, line := range map[string]string{
		"HTTP/1.0":     "HTTP/1.0 200 OK\r\n",
		"interim":      "HTTP/1.1 100 Continue\r\n",
		"600":          "HTTP/1.1 600 X\r\n",
		"short code":   "HTTP/1.1 20 OK\r\n",
		"no space":     "HTTP/1.1 200OK\r\n",
		"signed code":  "HTTP/1.1 +20 OK\r\n",
		"bare LF":      "HTTP/1.1 200 OK\n",
		"CR in reason": "HTTP/1.1 200 O\rK\r\n",
	} {
		if _, _, _, ok := PlainStatusLine([]byte(line)); ok {
			t.Errorf("%s: taken as plain", name)
		}
	}
}

// FuzzPlainRequestLine checks that a plain request line is its method,
// target and version with single spaces, that the path is the target up to
// its query, and that RefusedHead refuses none of it.
func FuzzPlainRequestLine(f *testing.F) {
	for _, s := range []string{"GET / HTTP/1.1\r\n", "POST /a/b?x=%41 HTTP/1.1\r\nHost: a\r\n\r\n", "GET /a/../b HTTP/1.1\r\n", "get /%zz HTTP/1.0\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		method, target, path, rest, ok := PlainRequestLine(b)
		if !ok {
			return
		}
		line := string(method) + " " + string(target) + " HTTP/1.1\r\n"
		if line+string(rest) != string(b) || !bytes.HasPrefix(target, path) ||
			(len(path) < len(target) && target[len(path)] != '?') || bytes.IndexByte(path, '?') >= 0 {
			t.Fatalf("%q: method %q target %q path %q rest %q", b, method, target, path, rest)
		}
		if code := RefusedHead(method, target, []byte("HTTP/1.1"), []byte("Host: a\r\n\r\n")); code != 0 {
			t.Fatalf("%q: plain, but refused with %d", b, code)
		}
	})
}

// FuzzPlainStatusLine checks that a plain status line is HTTP/1.1, its
// code as strconv reads it, and its reason, and that its rest follows its
// CRLF.
func FuzzPlainStatusLine(f *testing.F) {
	for _, s := range []string{"HTTP/1.1 200 OK\r\n", "HTTP/1.1 204\r\n\r\n", "HTTP/1.1 101 Switching\r\n", "HTTP/1.1 404 Not\rFound\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		status, code, rest, ok := PlainStatusLine(b)
		if !ok {
			return
		}
		n, err := strconv.Atoi(string(status[9:12]))
		if string(status)+"\r\n"+string(rest) != string(b) || !bytes.HasPrefix(status, []byte("HTTP/1.1 ")) ||
			err != nil || n != code || code < 200 || code > 599 || bytes.IndexAny(status, "\r\n") >= 0 {
			t.Fatalf("%q: status %q code %d rest %q", b, status, code, rest)
		}
	})
}
