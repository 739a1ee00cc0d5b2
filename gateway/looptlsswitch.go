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
type sockSwitch struct {
	raw           net.Conn // nil while a loop owns the socket
	in            []byte   // records fed by the loop, not read yet
	own           []byte   // in's storage, when in is not borrowed from the loop
	out           []byte   // records written on the loop, to send
	local, remote net.Addr
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
	if len(s.in) > 0 {
		n := copy(p, s.in)
		s.in = s.in[n:]
		return n, nil
	}
	if s.raw == nil {
		return 0, errNoRecord
	}
	return s.raw.Read(p)
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
