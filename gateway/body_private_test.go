package gateway

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadLength reads bodies of known length: whole, in pieces of one
// byte, and cut short (io.ErrUnexpectedEOF); its buffer never holds more
// than twice what arrived past the first firstRead bytes.
func TestReadLength(t *testing.T) {
	for _, n := range []int{1, firstRead - 1, firstRead, firstRead + 1, 5*firstRead + 3, 1 << 20} {
		body := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		for name, r := range map[string]io.Reader{"whole": bytes.NewReader(body), "one byte at a time": iotest.OneByteReader(bytes.NewReader(body))} {
			if n > 5*firstRead && name != "whole" {
				continue // a million reads
			}
			got, err := readLength(r, n)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("%d bytes, %s: %d bytes, %v", n, name, len(got), err)
			}
			if cap(got) != n {
				t.Errorf("%d bytes, %s: a buffer of %d", n, name, cap(got))
			}
		}
		if _, err := readLength(bytes.NewReader(body[:n-1]), n); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d bytes announced, one fewer sent: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	// A reader that sends 1000 bytes of 1 MiB, then fails: the buffer
	// grew to firstRead, no further.
	r := io.MultiReader(bytes.NewReader(make([]byte, 1000)), iotest.ErrReader(errors.New("stalled")))
	if _, err := readLength(&capWatch{r: r, max: firstRead}, 1<<20); err == nil || err.Error() != "stalled" {
		t.Errorf("a stalled body: %v", err)
	}
}

// capWatch fails a test-visible way when a read is offered more room than
// max: readLength's buffer grew past what arrived warrants.
type capWatch struct {
	r   io.Reader
	max int
}

func (c *capWatch) Read(p []byte) (int, error) {
	if len(p) > c.max {
		return 0, errors.New("buffer grew before the bytes came")
	}
	return c.r.Read(p)
}
