package h2loop

import "github.com/sluicehq/sluice/internal/invalid"

// ErrInvalidOptions is what NewConn returns, joined for each unusable
// field of its Config; it matches sluice.ErrInvalidOptions.
var ErrInvalidOptions = invalid.Sentinel("h2loop: invalid options")

// Config bounds one connection. A zero field takes its default.
type Config struct {
	// MaxConcurrentStreams is how many requests the client may have open
	// at once (SETTINGS_MAX_CONCURRENT_STREAMS); a stream past it is
	// refused (REFUSED_STREAM). Default 100.
	MaxConcurrentStreams int
	// MaxHeaderListSize bounds a request's decoded header list, each field
	// counted as its name, value and 32 bytes (SETTINGS_MAX_HEADER_LIST_SIZE,
	// and the hpack decoder's longest string); a request past it is
	// answered 431. Its header block may take at most twice as many bytes
	// on the wire before the connection ends. Default 32 KiB.
	MaxHeaderListSize int
	// MaxContinuations is how many CONTINUATION frames one header block
	// may have. Default 32.
	MaxContinuations int
	// StreamWindow is a request body's flow-control window
	// (SETTINGS_INITIAL_WINDOW_SIZE): the largest body a request not taken
	// by a StreamHandler may have, since the connection never extends it;
	// a taken stream's opens again as its handler consumes the body (see
	// Conn.Consumed). Default 65536.
	StreamWindow int
	// ConnWindow is the connection's receive window: it opens again as
	// bodies arrive, but a taken stream's only as its handler consumes it
	// (see Conn.Consumed) or the stream ends, so that a connection holds
	// at most ConnWindow of taken streams' unconsumed bodies. Default
	// 1 MiB.
	ConnWindow int
	// HeldBodies bounds the bodies a connection holds whole at once: those
	// of the streams not taken by a StreamHandler, each counted at its
	// content-length (at StreamWindow without one) from its HEADERS until
	// the stream closes, while it arrives and while its request is served.
	// A stream whose body would pass it is offered to StreamHandler.Open
	// with Stream.Crowded set, and refused (REFUSED_STREAM) if not taken.
	// Default ConnWindow.
	HeldBodies int
	// MaxBlockedBytes bounds the response bytes that flow control holds
	// back: past it, new streams are refused (REFUSED_STREAM) until the
	// client opens its windows. The requests of one Feed are served at its
	// end, so the answers held back may pass it by those of at most
	// MaxConcurrentStreams requests. Default 1 MiB.
	MaxBlockedBytes int
	// MaxResets is how many streams the client may reset before their
	// answers, or make the server reset (a stream error of its frames),
	// net of the streams answered in full (each answer takes one off the
	// count). Default four times MaxConcurrentStreams, as
	// golang.org/x/net/http2 lets that many handlers wait.
	MaxResets int
	// MaxControlFrames is how many PING, SETTINGS, PRIORITY and unknown
	// frames the client may send between two requests. Default 1000.
	MaxControlFrames int
	// ConnectProtocol offers extended CONNECT (RFC 8441,
	// SETTINGS_ENABLE_CONNECT_PROTOCOL): a CONNECT request with a
	// :protocol pseudo-header field, which only a StreamHandler serves.
	// Default false: such a request is malformed. A CONNECT without
	// :protocol (RFC 9113 section 8.5: :authority, no :scheme or :path)
	// goes to a StreamHandler as any request, for it to answer (as
	// net/http's HTTP/2 server hands it to its handler); without one it is
	// reset.
	ConnectProtocol bool
	// MaxEmptyData is how many DATA frames without data or END_STREAM the
	// client may send between two requests. Default 100.
	MaxEmptyData int
}

// withDefaults returns c with its defaults, or the problems of its fields.
func (c Config) withDefaults() (Config, error) {
	var p invalid.Problems
	p.Prefix, p.Sentinel = "h2loop", ErrInvalidOptions
	def := func(name string, v *int, d, lo, hi int) {
		if *v == 0 {
			*v = d
		}
		if *v < lo || *v > hi {
			p.Addf("%s %d is outside [%d, %d]", name, *v, lo, hi)
		}
	}
	def("MaxConcurrentStreams", &c.MaxConcurrentStreams, 100, 1, 1<<20)
	def("MaxHeaderListSize", &c.MaxHeaderListSize, 32<<10, 1024, 16<<20)
	def("MaxContinuations", &c.MaxContinuations, 32, 1, 1<<16)
	def("StreamWindow", &c.StreamWindow, 64<<10, 1, 1<<31-1)
	def("ConnWindow", &c.ConnWindow, 1<<20, 65535, 1<<31-1)
	def("HeldBodies", &c.HeldBodies, c.ConnWindow, 1, 1<<31-1)
	def("MaxBlockedBytes", &c.MaxBlockedBytes, 1<<20, 1, 1<<30)
	def("MaxResets", &c.MaxResets, 4*c.MaxConcurrentStreams, 1, 1<<30)
	def("MaxControlFrames", &c.MaxControlFrames, 1000, 1, 1<<30)
	def("MaxEmptyData", &c.MaxEmptyData, 100, 1, 1<<30)
	return c, p.Err()
}
