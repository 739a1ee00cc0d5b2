package h2loop

import (
	"time"

	"golang.org/x/net/http2/hpack"
)

// streamState is where a stream is (RFC 9113 section 5.1, as a server
// that answers once the request is whole sees it).
type streamState uint8

const (
	stateOpen       streamState = iota // the request is arriving
	stateHalfClosed                    // the request is whole (half-closed, remote); the answer is due
	stateClosed                        // answered, reset or gone
)

// Stream is one request and its answer. Its fields are the request's, set
// before Serve; they stay valid until the handler's last call for the
// stream (Respond, Reset, or its Cancel).
type Stream struct {
	// ID is the stream's identifier.
	ID uint32
	// Method, Scheme, Authority, Path and Protocol are the request's
	// pseudo-header fields (empty when absent); :protocol comes only on an
	// extended CONNECT (see Config.ConnectProtocol).
	Method, Scheme, Authority, Path, Protocol string
	// Header holds the request's other fields in the order they came, with
	// lower-case names. Cookie fields are as they came, one per crumb (RFC
	// 9113 section 8.2.3).
	Header []hpack.HeaderField
	// Trailer holds the fields of the request's trailers; nil without.
	Trailer []hpack.HeaderField
	// Body is the request's body; nil on a stream taken before it (see
	// StreamHandler.Open).
	Body []byte
	// ContentLength is the request's content-length; -1 without one.
	ContentLength int64
	// Crowded is set, when StreamHandler.Open is offered the stream, if
	// its body would pass what its connection may hold whole (see
	// Config.HeldBodies): not taken, the stream is refused.
	Crowded bool
	// Malformed is set on a request that RFC 9113 makes malformed but
	// that net/http's HTTP/2 server, or the gateway behind it, answers (400)
	// rather than resets (section 8.1.1 lets a server answer before it
	// resets): a :method that is no token, a connection-specific field or
	// a te other than "trailers" (section 8.2.2), content-length fields of different lengths
	// (ContentLength is the first), one that is no length on a request
	// without a body, or a body held whole that ended shorter than its
	// content-length. Only a connection with a StreamHandler serves such
	// a stream (offered to Open at its HEADERS unless it has no body, else
	// to Serve when it ends); without one it is reset (PROTOCOL_ERROR).
	// Its handler answers it and never forwards it.
	Malformed bool
	// Value is the handler's own.
	Value any

	state      streamState
	served     bool                // handed to Serve, or taken by Open
	streamed   bool                // taken by Open: its body goes to Data
	answered   bool                // the answer's last part, or Reset, was given
	headed     bool                // the answer's HEADERS were sent
	held       int64               // the bytes counted for its body in the connection's HeldBodies
	received   int64               // a taken stream's body bytes so far
	owed       int64               // a taken stream's body bytes consumed, not yet given back
	unconsumed int64               // a taken stream's body bytes (padding included) the connection's window lacks
	trailer    []hpack.HeaderField // the answer's trailers, sent after pending
	trailing   bool                // a HEADERS frame of trailers has come
	opened     time.Time           // when its HEADERS came (the Feed's start)
	recvWindow int64
	sendWindow int64
	pending    []byte // response body held back by flow control
	blocked    bool   // in the connection's blocked list
	paced      bool   // see Conn.SetPaced
}

// end closes s.
func (s *Stream) end() {
	s.state = stateClosed
	s.pending = nil
}
