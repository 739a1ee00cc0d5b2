package http1

import (
	"bytes"
	"encoding/binary"
)

// Headers calls fn with the name and value of each header line in b, the
// lines after a start line up to and with the empty line. It reports
// false, at once, when a line is malformed (see HeaderLine) or fn returns
// false.
func Headers(b []byte, fn func(name, value []byte) bool) bool {
	for len(b) > 2 {
		name, value, rest, ok := HeaderLine(b)
		if !ok || !fn(name, value) {
			return false
		}
		b = rest
	}
	return true
}

// HeaderLine splits the first header line off b: its name, its value
// without surrounding spaces and tabs, and the lines after it. It reports
// false when the line is not a token, a colon and a value without control
// characters other than tabs, ending in CRLF.
func HeaderLine(b []byte) (name, value, rest []byte, ok bool) {
	end := bytes.IndexByte(b, '\n')
	if end < 1 || b[end-1] != '\r' {
		return nil, nil, nil, false
	}
	line := b[:end-1]
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !Token(line[:colon]) {
		return nil, nil, nil, false
	}
	value = line[colon+1:]
	if HasCtl(value) {
		return nil, nil, nil, false
	}
	return line[:colon], TrimSpace(value), b[end+1:], true
}

// HasCtl reports whether v holds a control character other than tab. It
// looks at eight bytes at a time while none is below 0x20 or 0x7f (the
// tests of "Bit Twiddling Hacks" for a byte less than n and a zero byte,
// exact on whether there is one), then byte by byte.
func HasCtl(v []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(v) >= 8 {
		x := binary.LittleEndian.Uint64(v)
		del := x ^ 0x7f*ones
		if (x-0x20*ones)&^x&highs|(del-ones)&^del&highs != 0 {
			break // a control character, or a tab
		}
		v = v[8:]
	}
	for _, c := range v {
		if ctlChar[c] {
			return true
		}
	}
	return false
}

// ContentLength parses a Content-Length value: 1 to 9 digits, or -1.
func ContentLength(v []byte) int {
	if len(v) == 0 || len(v) > 9 {
		return -1
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = 10*n + int(c-'0')
	}
	return n
}

// UpperToken reports whether b is upper-case letters only, as methods are.
func UpperToken(b []byte) bool {
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// Token reports whether b is a token (RFC 9110 section 5.6.2).
func Token(b []byte) bool {
	for _, c := range b {
		if !tokenChar[c] {
			return false
		}
	}
	return len(b) > 0
}

var pathChar, tokenChar, hostChar, hexChar = charTable(
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/"),
	charTable("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~"),
	charTable("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"),
	charTable("abcdefABCDEF0123456789")

// ctlChar holds the control characters but tab.
var ctlChar = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t'
	}
	t[0x7f] = true
	return t
}()

func charTable(chars string) (t [256]bool) {
	for i := range len(chars) {
		t[chars[i]] = true
	}
	return t
}
