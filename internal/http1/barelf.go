package http1

// HeadScan finds, in a request head read in pieces, a line ending in LF
// alone (the empty lines before the request line aside: RFC 9112 section
// 2.2 has a server ignore one), which the gateway refuses (400) and can
// refuse before the head ends, where a parser that waits for the CRLF
// CRLF that ends a head would wait for the header timeout; and where the
// head ends (its CRLF CRLF), looking at each byte once however many reads
// bring it; and whether its request line is of another version than
// HTTP/1.x (see OtherVersion). Its zero value is ready for a head's first
// byte.
type HeadScan struct {
	begun bool    // past the empty lines before the request line
	prev  byte    // the byte before the next
	line  int     // the bytes of the current line so far, its CR included
	lines int     // the lines ended
	tail  [9]byte // the request line's last bytes so far, its CR aside
}

// Next looks at b, the head's next bytes. It returns the index in b of
// the first bare LF (bare true), else of the byte after the CRLF CRLF
// that ends the head (end true), else len(b): the head goes on past b.
func (s *HeadScan) Next(b []byte) (i int, bare, end bool) {
	for i, c := range b {
		switch {
		case !s.begun && (c == '\r' || c == '\n'):
			continue
		case c != '\n':
			s.begun, s.prev = true, c
			s.line++
			if s.lines == 0 && c != '\r' {
				copy(s.tail[:], s.tail[1:])
				s.tail[len(s.tail)-1] = c
			}
			continue
		case s.prev != '\r':
			return i, true, false
		case s.line == 1:
			return i + 1, false, true
		}
		s.prev, s.line = c, 0
		s.lines++
	}
	return len(b), false, false
}

// OtherVersion reports whether the request line has ended, in another
// version than HTTP/1.x (RFC 9110 section 2.5: one the gateway refuses
// 505, see RefusedHead).
func (s *HeadScan) OtherVersion() bool {
	return s.lines > 0 && (s.tail[0] != ' ' || !IsHTTP1(s.tail[1:]))
}

// IsHTTP1 reports whether proto is HTTP/1.x, x a digit: a version the
// gateway serves (HTTP/1.2 and later as HTTP/1.1, RFC 9110 section 2.5).
func IsHTTP1(proto []byte) bool {
	return len(proto) == len("HTTP/1.1") && string(proto[:7]) == "HTTP/1." && proto[7] >= '0' && proto[7] <= '9'
}
