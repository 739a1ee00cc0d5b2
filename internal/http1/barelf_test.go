package http1

import (
	"strings"
	"testing"
)

// TestHeadScanBareLF: HeadScan finds a line ending in LF alone in a head
// whole or not, the empty lines before its request line aside.
func TestHeadScanBareLF(t *testing.T) {
	for b, want := range map[string]bool{
		"GET / HTTP/1.1\nHost: x\n\n": true, "GET / HTTP/1.1\r\nHost: x\n": true, "GET / HTTP/1.1\r\nHost: x\r\n\n": true,
		"GET /\n": true, "GET / HTTP/1.1\r\nX: a\nb\r\n": true,
		"GET / HTTP/1.1\r\nHost: x\r\n": false, "GET / HTTP/1.1\r\nHost: x\r": false, "\r\nGET / HTTP/1.1\r\n": false,
		"\nGET / HTTP/1.1\r\nHost": false, "GET / HT": false, "": false, "\n": false,
	} {
		var s HeadScan
		if _, got, _ := s.Next([]byte(b)); got != want {
			t.Errorf("%q: bare LF %v, want %v", b, got, want)
		}
	}
}

// BenchmarkHeadScan looks at a head of 32 KiB (server.max_header_bytes'
// default) that comes 64 bytes a read, as the loops do: each read looks
// at its own bytes only. (Looking at the whole head at each read, from
// its start, looked at every byte again: a slow client's head cost time
// in its size squared.)
func BenchmarkHeadScan(b *testing.B) {
	h := []byte("GET / HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", 4<<10))
	for b.Loop() {
		var s HeadScan
		for n := 0; n < len(h); n += 64 {
			if _, bare, _ := s.Next(h[n:min(n+64, len(h))]); bare {
				b.Fatal("bare LF")
			}
		}
	}
}

// bareLFAt is where head's first line ending in LF alone ends, the empty
// lines before its request line aside: TestHeadScan's reference.
func bareLFAt(head string) (int, bool) {
	i := 0
	for i < len(head) && (head[i] == '\r' || head[i] == '\n') {
		i++
	}
	for ; i < len(head); i++ {
		if head[i] == '\n' && head[i-1] != '\r' {
			return i, true
		}
	}
	return 0, false
}

// TestHeadScan gives heads to HeadScan whole and byte by byte: it finds
// the bare LF bareLFAt finds in the bytes before the head's CRLF CRLF,
// at the same place, else the head's end just past that CRLF CRLF.
func TestHeadScan(t *testing.T) {
	for _, head := range []string{
		"GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\r\n\n", "GET / HTTP/1.1\r\nX: a\nb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "\r\nGET / HTTP/1.1\r\n\r\nbody\n", "\n\r\n\nGET / HTTP/1.1\r\nHost: x\n",
		"\r\r\nGET /\n", "GET / HTTP/1.1\r\nX: \r\r\n\r\n", "GET / HTTP/1.1\r\n\r\n\n", "\n", "", "GET / HT",
		"\r\nGET / HTTP/1.1\r\n",
	} {
		wantAt, wantBare, wantEnd := len(head), false, false
		if end := strings.Index(head, "\r\n\r\n"); end >= 0 {
			wantAt, wantEnd = end+4, true
		}
		if at, bare := bareLFAt(head[:wantAt]); bare {
			wantAt, wantBare, wantEnd = at, true, false
		}
		var whole HeadScan
		if at, bare, end := whole.Next([]byte(head)); at != wantAt || bare != wantBare || end != wantEnd {
			t.Errorf("%q whole: %d %v %v, want %d %v %v", head, at, bare, end, wantAt, wantBare, wantEnd)
		}
		var s HeadScan
		at, bare, end := len(head), false, false
		for n := range len(head) {
			if i, b, e := s.Next([]byte(head[n : n+1])); b || e {
				at, bare, end = n+i, b, e
				break
			}
		}
		if at != wantAt || bare != wantBare || end != wantEnd {
			t.Errorf("%q byte by byte: %d %v %v, want %d %v %v", head, at, bare, end, wantAt, wantBare, wantEnd)
		}
	}
}

// TestHeadScanOtherVersion: HeadScan tells a request line of another
// version than HTTP/1.x once the line has ended, whole or byte by byte.
func TestHeadScanOtherVersion(t *testing.T) {
	for head, want := range map[string]bool{
		"POST / HTTP/2.0\r\nHost: x\r\n": true, "\r\nGET / HTTP/0.9\r\n": true, "GET /a/HTTP/1.1\r\n": true,
		"GET / HTTP/1.1\r\nX: HTTP/2.0\r\n\r\n": false, "GET / HTTP/1.0\r\n": false, "GET / HTTP/1.2\r\n": false,
		"GET / HTTP/2.0": false, "": false,
	} {
		var whole, bytewise HeadScan
		whole.Next([]byte(head))
		for i := range len(head) {
			bytewise.Next([]byte(head[i : i+1]))
		}
		if whole.OtherVersion() != want || bytewise.OtherVersion() != want {
			t.Errorf("%q: other version %v (byte by byte %v), want %v", head, whole.OtherVersion(), bytewise.OtherVersion(), want)
		}
	}
}
