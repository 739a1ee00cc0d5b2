package http1

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// crlf turns the line feeds of a test message into CRLF.
func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

func TestHeaders(t *testing.T) {
	var got []string
	ok := Headers(crlf("Host: a\nX-Empty:\nX-Pad: \t v w \t\nx-lower:1\n\n"), func(name, value []byte) bool {
		got = append(got, string(name)+"="+string(value))
		return true
	})
	if want := "Host=a X-Empty= X-Pad=v w x-lower=1"; !ok || strings.Join(got, " ") != want {
		t.Errorf("Headers: ok %v, %q, want %q", ok, strings.Join(got, " "), want)
	}
	calls := 0
	if Headers(crlf("A: 1\nB: 2\n\n"), func(name, value []byte) bool { calls++; return false }) || calls != 1 {
		t.Errorf("fn returning false: %d calls, want 1 and false", calls)
	}
	for name, block := range map[string]string{
		"space before colon": "Host : a\r\n\r\n",
		"no colon":           "Host\r\n\r\n",
		"empty name":         ": a\r\n\r\n",
		"folded line":        "X: a\r\n b\r\n\r\n",
		"bare LF":            "X: a\nY: b\r\n\r\n",
		"bare CR in value":   "X: a\rb\r\n\r\n",
		"NUL in value":       "X: a\x00\r\n\r\n",
		"DEL in value":       "X: a\x7f\r\n\r\n",
		"non-token name":     "X(y): a\r\n\r\n",
	} {
		if Headers([]byte(block), func(name, value []byte) bool { return true }) {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestHasCtl checks the eight-bytes-at-a-time test against the plain one:
// every byte value at every place of a value, beside printable bytes and
// obs-text.
func TestHasCtl(t *testing.T) {
	base := []byte("abc\x80\xffdefghij\xfeklmnopq")
	for i := range base {
		for c := range 256 {
			v := bytes.Clone(base)
			v[i] = byte(c)
			want := c < 0x20 && c != '\t' || c == 0x7f
			if got := HasCtl(v); got != want {
				t.Fatalf("byte %#x at %d: HasCtl %v, want %v", c, i, got, want)
			}
		}
	}
}

func TestContentLength(t *testing.T) {
	for v, want := range map[string]int{
		"0": 0, "5": 5, "007": 7, "999999999": 999999999,
		"": -1, "1234567890": -1, "+1": -1, "-1": -1, " 1": -1, "1 ": -1, "0x10": -1,
	} {
		if got := ContentLength([]byte(v)); got != want {
			t.Errorf("ContentLength(%q) = %d, want %d", v, got, want)
		}
	}
}

func TestTokens(t *testing.T) {
	for _, c := range []struct {
		b            string
		token, upper bool
	}{
		{"GET", true, true}, {"get", true, false}, {"M-SEARCH", true, false}, {"X-Api_Key", true, false},
		{"", false, true}, {"a b", false, false}, {"a:b", false, false}, {"é", false, false},
	} {
		if Token([]byte(c.b)) != c.token || UpperToken([]byte(c.b)) != c.upper {
			t.Errorf("%q: Token %v UpperToken %v, want %v %v", c.b, Token([]byte(c.b)), UpperToken([]byte(c.b)), c.token, c.upper)
		}
	}
}

// FuzzHeaderLine checks that a line HeaderLine accepts is its name, a
// colon and its value with optional whitespace around it, that the name is
// a token and the value holds no control character, and that HasCtl agrees
// with a byte-by-byte test.
func FuzzHeaderLine(f *testing.F) {
	for _, s := range []string{"Host: a\r\n\r\n", "X:\t v \r\nY: 2\r\n", "X: a\rb\r\n", "Bad Name: v\r\n", "X: \x00\x7f\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		slow := false
		for _, c := range b {
			slow = slow || c < 0x20 && c != '\t' || c == 0x7f
		}
		if HasCtl(b) != slow {
			t.Fatalf("%q: HasCtl %v, want %v", b, !slow, slow)
		}
		name, value, rest, ok := HeaderLine(b)
		if !ok {
			return
		}
		line := b[:len(b)-len(rest)]
		if !bytes.HasSuffix(line, []byte("\r\n")) || bytes.IndexByte(line[:len(line)-2], '\n') >= 0 {
			t.Fatalf("%q: line %q is not one line ending in CRLF", b, line)
		}
		raw := line[len(name)+1 : len(line)-2]
		if !Token(name) || line[len(name)] != ':' || HasCtl(raw) ||
			!bytes.Equal(TrimSpace(raw), value) || !bytes.Contains(raw, value) {
			t.Fatalf("%q: name %q value %q from line %q", b, name, value, line)
		}
		if len(value) > 0 && (value[0] == ' ' || value[0] == '\t' || value[len(value)-1] == ' ' || value[len(value)-1] == '\t') {
			t.Fatalf("%q: value %q keeps whitespace", b, value)
		}
	})
}

// FuzzContentLength checks ContentLength against strconv: 1 to 9 digits
// are their value, anything else -1.
func FuzzContentLength(f *testing.F) {
	for _, s := range []string{"0", "123", "+1", "1234567890", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := -1
		if n, err := strconv.ParseUint(s, 10, 64); err == nil && len(s) <= 9 {
			want = int(n)
		}
		if got := ContentLength([]byte(s)); got != want {
			t.Fatalf("ContentLength(%q) = %d, want %d", s, got, want)
		}
	})
}
