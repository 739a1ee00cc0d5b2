package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/valyala/fasthttp"
)

// errClientBody marks an error in reading a streamed request body from the
// client: the client's fault, answered 400 (or 413 for errBodyTooLarge),
// and never counted against the upstream's health.
var errClientBody = &answerError{msg: "gateway: reading the request body", code: 400, reason: "body_unreadable"}

// errBodyTooLarge is the error of a streamed request body that is longer
// than server.max_body_bytes. It matches errClientBody too.
var errBodyTooLarge = &answerError{msg: "gateway: request body longer than server.max_body_bytes",
	code: 413, reason: "body_too_large", err: errClientBody}

// answerError is an error of the gateway's own that says how it is answered
// (answer.Statuser).
type answerError struct {
	msg    string
	code   int
	reason string
	err    error // what it wraps; may be nil
}

func (e *answerError) Error() string               { return e.msg }
func (e *answerError) Unwrap() error               { return e.err }
func (e *answerError) AnswerStatus() (int, string) { return e.code, e.reason }

// errClientGone is the error of a request whose client closed its
// connection before the answer: its attempt is cancelled, and says nothing
// about the upstream (Ignored).
var errClientGone = fmt.Errorf("gateway: the client went away: %w", context.Canceled)

// clientBody is a streamed request body on its way upstream. It reads at
// most left bytes (no limit when left is negative) and marks its errors with
// errClientBody, so that a body that is too long or broken off fails the
// attempt instead of reaching the upstream cut short as if it were whole.
// An error is final: every later Read returns it, and the bytes read with
// it are dropped (fasthttp's chunked writer sends what a Read returns with
// an error and reads on, which made a broken chunked body look whole).
//
// With a header (head), the request's trailer section, which fasthttp
// reads into it at the body's end, loses the fields the gateway sets or
// drops in the header, and those the route's request rules (edit) set or
// remove there (see dropTrailerClaims), before fasthttp's writer sends it
// on.
type clientBody struct {
	r     io.Reader
	head  *fasthttp.RequestHeader // the request's, whose trailers are cleaned; nil: none
	edit  *headerEdit             // the route's request rules; nil: none
	left  int64
	read  int64 // bytes read so far, for the log
	ended bool  // the body was read to its end
	err   error // the error every Read returns once the body broke
}

func newClientBody(r io.Reader, maxBody int) *clientBody {
	if maxBody <= 0 {
		return &clientBody{r: r, left: -1}
	}
	return &clientBody{r: r, left: int64(maxBody)}
}

// Trailer returns the trailers of the body b bounds when it has them (a
// trailedBody's, for an HTTP/2 target), else nil: b is an
// upstream.TrailedBody.
func (b *clientBody) Trailer() http.Header {
	if tb, ok := b.r.(upstream.TrailedBody); ok {
		return tb.Trailer()
	}
	return nil
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left >= 0 && int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	if b.left >= 0 {
		if int64(n) > b.left {
			b.err = errBodyTooLarge
			return 0, b.err
		}
		b.left -= int64(n)
	}
	b.read += int64(n)
	if err != nil && err != io.EOF {
		b.err = fmt.Errorf("%w: %w", errClientBody, err)
		return 0, b.err
	}
	if err == io.EOF {
		b.ended = true
		if b.head != nil {
			dropTrailerClaims(b.head, b.edit)
		}
	}
	return n, err
}

// dropTrailerClaims removes from h's trailer section the fields a
// trailer may not carry (see trailerClaim), and those edit (nil: none)
// takes out of the header (an HTTP/2 request's trailers lose them too, see
// reannounceTrailers), before fasthttp's writer sends it on.
func dropTrailerClaims(h *fasthttp.RequestHeader, edit *headerEdit) {
	var drop []string
	http1.Headers(h.TrailerHeader(), func(k, _ []byte) bool {
		if trailerClaim(k) || edit != nil && edit.drops(k) {
			drop = append(drop, string(k))
		}
		return true
	})
	for _, k := range drop {
		h.Del(k)
	}
}

// classify is the gateway's sluice.Classifier: DefaultClassifier, except
// that a failure of the client's own request body, a client that left, a
// hedged attempt that another won, or a gRPC call ended idle, says nothing
// about the upstream (Ignored), so that clients cannot trip breakers or
// shrink limits with broken uploads, by hanging up or by staying silent.
func classify(ctx context.Context, err error) sluice.Class {
	if errors.Is(err, errClientBody) || errors.Is(err, errClientGone) || errors.Is(err, errLost) || errors.Is(err, errGRPCIdle) {
		return sluice.Ignored
	}
	return sluice.DefaultClassifier(ctx, err)
}

// trailerClaim reports whether k, the name of a request's trailer field,
// would speak for the gateway, the connection or the framing, so that the
// field is dropped: those http1.Drop drops from a trailer section, the
// other X-Forwarded-* of a trusted proxy too (fasthttp refuses their '-'
// forms in a trailer whoever sends them), and the trace context (many
// upstreams read trailers with the header). fasthttp refuses some of them
// itself (the '-' forms of X-Forwarded-*, Host, the framing fields).
func trailerClaim(k []byte) bool {
	return trailerDrop.Drops(k)
}

var trailerDrop = http1.Drop{Trace: true, Trailer: true}
