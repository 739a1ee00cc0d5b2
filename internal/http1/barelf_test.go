package http1

import (
	"strings"
	"testing"
)

func TestBareLF(t *testing.T) {
	for b, want := range map[string]bool{
		"GET / HTTP/1.1\nHost: x\n\n": true, "GET / HTTP/1.1\r\nHost: x\n": true, "GET / HTTP/1.1\r\nHost: x\r\n\n": true,
		"GET /\n": true, "GET / HTTP/1.1\r\nX: a\nb\r\n": true,
		"GET / HTTP/1.1\r\nHost: x\r\n": false, "GET / HTTP/1.1\r\nHost: x\r": false, "\r\nGET / HTTP/1.1\r\n": false,
		"\nGET / HTTP/1.1\r\nHost": false, "GET / HT": false, "": false, "\n": false,
	} {
		if got, _ := BareLFFrom([]byte(b), 0); got != want {
			t.Errorf("BareLFFrom(%q, 0) = %v, want %v", b, got, want)
		}
	}
}

// TestBareLFFrom gives every head of TestBareLF's kind byte by byte, as
// reads that bring one byte each would: BareLFFrom, looking at each byte
// once, says what it says of the whole from 0 at every step.
func TestBareLFFrom(t *testing.T) {
	for _, head := range []string{
		"GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\r\n\n", "GET / HTTP/1.1\r\nX: a\nb\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "\r\nGET / HTTP/1.1\r\n", "\n\r\n\nGET / HTTP/1.1\r\nHost: x\n",
		"\r\r\nGET /\n", "\n", "",
	} {
		from := 0
		for n := range len(head) + 1 {
			bare, next := BareLFFrom([]byte(head[:n]), from)
			if want, _ := BareLFFrom([]byte(head[:n]), 0); bare != want {
				t.Fatalf("%q, from %d: %v, want %v", head[:n], from, bare, want)
			}
			if bare {
				break
			}
			if next > n {
				t.Fatalf("%q: next %d past the end", head[:n], next)
			}
			from = next
		}
	}
}

// BenchmarkBareLFFrom looks at a head of 32 KiB (server.max_header_bytes'
// default) that comes 64 bytes a read, as the loops do: each read looks
// at its own bytes only. (Looking at the whole head at each read, from
// 0, looked at every byte again: a slow client's head cost time in its
// size squared.)
func BenchmarkBareLFFrom(b *testing.B) {
	h := []byte("GET / HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", 4<<10))
	for b.Loop() {
		from := 0
		for n := 64; n < len(h); n += 64 {
			var bare bool
			if bare, from = BareLFFrom(h[:n], from); bare {
				b.Fatal("bare LF")
			}
		}
	}
}

// TestHeadScan gives heads to HeadScan whole and byte by byte: it finds
// the bare LF BareLFFrom finds in the bytes before the head's CRLF CRLF,
// at the same place, else the head's end just past that CRLF CRLF.
func TestHeadScan(t *testing.T) {
	for _, head := range []string{
		"GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\r\n\n", "GET / HTTP/1.1\r\nX: a\nb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "\r\nGET / HTTP/1.1\r\n\r\nbody\n", "\n\r\n\nGET / HTTP/1.1\r\nHost: x\n",
		"\r\r\nGET /\n", "GET / HTTP/1.1\r\nX: \r\r\n\r\n", "GET / HTTP/1.1\r\n\r\n\n", "\n", "", "GET / HT",
	} {
		wantAt, wantBare, wantEnd := len(head), false, false
		if end := strings.Index(head, "\r\n\r\n"); end >= 0 {
			wantAt, wantEnd = end+4, true
		}
		if bare, at := BareLFFrom([]byte(head[:wantAt]), 0); bare {
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
