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
