package gateway

import (
	"net"
	"time"
)

// sockSwitch is the socket under a TLS listener's tls.Conn, whose owner
// changes: during the handshake a goroutine reads and writes the socket
// (raw) directly; once an event loop takes the connection (looptls.go)
// raw is nil, Read returns the records the loop fed it (in), and Write
// keeps what tls.Conn encrypts (out) for the loop to send; when the loop
// hands the connection over again, raw is the loop's socket taken out of
// it, read after the records still in. Only the connection's owner of the
// moment uses it: the hand-overs between owners order its uses.
//
// It follows the records of what it hands tls.Conn, from the connection's
// first byte, so that a loop knows when tls.Conn has a record to read
// (recordIn) and need not call it in vain: on a loop it hands tls.Conn no
// byte past the end of the record under way, so that tls.Conn never holds
// more than part of one record, unless a goroutine's reads gave it more
// (held).
type sockSwitch struct {
	raw           net.Conn // nil while a loop owns the socket
	in            []byte   // records fed by the loop, not read yet
	own           []byte   // in's storage, when in is not borrowed from the loop
	out           []byte   // records written on the loop, to send
	local, remote net.Addr

	// The record under way in what was handed to tls.Conn: left bytes of
	// its body to come, or, when left is 0, nhdr bytes of its header in
	// hdr (none: the next byte starts a record).
	left int
	hdr  [recordHeaderLen]byte
	nhdr int
	// held is set when a goroutine's read handed tls.Conn bytes: it may
	// hold whole records, which a loop reads before it trusts recordIn.
	held bool
}

func newSockSwitch(c net.Conn) *sockSwitch {
	return &sockSwitch{raw: c, local: c.LocalAddr(), remote: c.RemoteAddr()}
}

// errNoRecord is what a sockSwitch's Read returns on a loop when it has no
// more bytes: a net.Error that is a timeout and temporary. crypto/tls
// does not make such an error sticky (readRecordOrCCS keeps the record
// read so far and sets c.in's error only for an error that is not a
// temporary net.Error), so the loop calls tls.Conn's Read again once more
// records came, and Read goes on where it stopped.
var errNoRecord net.Error = noRecord{}

type noRecord struct{}

func (noRecord) Error() string   { return "gateway: no more TLS records on the loop yet" }
func (noRecord) Timeout() bool   { return true }
func (noRecord) Temporary() bool { return true }

func (s *sockSwitch) Read(p []byte) (int, error) {
	if s.raw == nil {
		if len(s.in) == 0 {
			return 0, errNoRecord
		}
		n := copy(p[:min(len(p), s.toBoundary())], s.in)
		s.track(s.in[:n])
		s.in = s.in[n:]
		return n, nil
	}
	s.held = true
	if len(s.in) > 0 {
		n := copy(p, s.in)
		s.track(s.in[:n])
		s.in = s.in[n:]
		return n, nil
	}
	n, err := s.raw.Read(p)
	s.track(p[:n])
	return n, err
}

// arriving reports whether part of a record has come, not whole yet:
// tls.Conn holds the start of one (see track), or in holds bytes not
// handed to it. A request is arriving in it.
func (s *sockSwitch) arriving() bool {
	return s.left > 0 || s.nhdr > 0 || len(s.in) > 0
}

// recordHeaderLen is the length of a TLS record's header: type (1),
// version (2), length (2).
const recordHeaderLen = 5

// maxRecordBody is the longest body of a TLS 1.3 record that crypto/tls
// accepts (2^14 bytes and 256 of expansion); it refuses a header that
// announces more at once. TLS 1.2 allows 2048 of expansion: tls.Conn,
// read at such a header, reads what has come of the record and waits.
const maxRecordBody = 16384 + 256

// recordVersion is the version in the header of every record after the
// handshake, of TLS 1.2 and 1.3 (the versions the gateway accepts);
// crypto/tls refuses a header with another at once.
const recordVersion = 0x0303

// track moves the record parser past b, bytes handed to tls.Conn.
func (s *sockSwitch) track(b []byte) {
	for len(b) > 0 {
		if s.left > 0 {
			k := min(s.left, len(b))
			s.left -= k
			b = b[k:]
			continue
		}
		k := copy(s.hdr[s.nhdr:], b)
		s.nhdr += k
		b = b[k:]
		if s.nhdr == recordHeaderLen {
			s.left, s.nhdr = int(s.hdr[3])<<8|int(s.hdr[4]), 0
		}
	}
}

// toBoundary returns how many bytes of in end the record under way (its
// header, when it is not whole yet), or all of in when in does not.
func (s *sockSwitch) toBoundary() int {
	switch {
	case s.left > 0:
		return s.left
	case s.nhdr > 0:
		return recordHeaderLen - s.nhdr
	case len(s.in) >= recordHeaderLen:
		return recordHeaderLen + (int(s.in[3])<<8 | int(s.in[4]))
	}
	return len(s.in)
}

// recordIn reports whether in holds the rest of the record under way, or
// a header that crypto/tls may refuse (a version other than
// recordVersion, a length over maxRecordBody): tls.Conn, which holds part
// of a record at most (unless held), has something to read or to refuse.
func (s *sockSwitch) recordIn() bool {
	in := s.in
	if s.left > 0 {
		return len(in) >= s.left
	}
	var h [recordHeaderLen]byte
	k := copy(h[:], s.hdr[:s.nhdr])
	if len(in) < recordHeaderLen-k {
		return false
	}
	in = in[copy(h[k:], in):]
	n := int(h[3])<<8 | int(h[4])
	return int(h[1])<<8|int(h[2]) != recordVersion || n > maxRecordBody || len(in) >= n
}

func (s *sockSwitch) Write(p []byte) (int, error) {
	if s.raw == nil {
		s.out = append(s.out, p...)
		return len(p), nil
	}
	return s.raw.Write(p)
}

// Close closes the socket of a goroutine; a loop closes its own.
func (s *sockSwitch) Close() error {
	if s.raw == nil {
		return nil
	}
	return s.raw.Close()
}

func (s *sockSwitch) LocalAddr() net.Addr  { return s.local }
func (s *sockSwitch) RemoteAddr() net.Addr { return s.remote }

// The deadlines are a goroutine's; a loop has timers of its own.

func (s *sockSwitch) SetDeadline(t time.Time) error {
	if s.raw == nil {
		return nil
	}
	return s.raw.SetDeadline(t)
}

func (s *sockSwitch) SetReadDeadline(t time.Time) error {
	if s.raw == nil {
		return nil
	}
	return s.raw.SetReadDeadline(t)
}

func (s *sockSwitch) SetWriteDeadline(t time.Time) error {
	if s.raw == nil {
		return nil
	}
	return s.raw.SetWriteDeadline(t)
}
