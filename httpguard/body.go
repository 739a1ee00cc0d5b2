package httpguard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// maxDrain is how much of a superseded or discarded response body Transport
// reads so that its connection can be reused; a longer body's connection is
// closed instead.
const maxDrain = 64 << 10

// errSuperseded ends the body of a response that a later attempt superseded,
// when the body was too long to keep.
var errSuperseded = errors.New("httpguard: response body discarded: a later attempt superseded the response")

// errBodyDone is the cause an attempt's context is cancelled with once its
// response body has been read or closed.
var errBodyDone = errors.New("httpguard: response body done")

// attemptLink ties the context one attempt's request is sent with to the
// attempt's context and to the caller's. The request context carries the
// attempt context's values; it is cancelled when the attempt context is,
// until the round trip returns, and when the caller's context is, until the
// response body is read to its end or closed. A per-attempt timeout thus
// bounds the wait for the response, but does not cut its body off the
// moment the attempt returns (as cancelling the attempt context would).
type attemptLink struct {
	cancel      context.CancelCauseFunc
	stopAttempt func() bool
	stopCaller  func() bool
	released    atomic.Bool
}

// newAttemptLink returns the context to send one attempt with, and its link.
func newAttemptLink(attempt, caller context.Context) (context.Context, *attemptLink) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(attempt))
	l := &attemptLink{cancel: cancel}
	l.stopAttempt = context.AfterFunc(attempt, func() { cancel(context.Cause(attempt)) })
	l.stopCaller = context.AfterFunc(caller, func() { cancel(context.Cause(caller)) })
	return ctx, l
}

// detach stops the attempt context from cancelling the request: the round
// trip is over.
func (l *attemptLink) detach() { l.stopAttempt() }

// release frees the link once the response is done with. It is idempotent.
func (l *attemptLink) release() {
	if l.released.CompareAndSwap(false, true) {
		l.stopAttempt()
		l.stopCaller()
		l.cancel(errBodyDone)
	}
}

// responseBody releases an attempt's link when the body is read to its end
// or closed.
type responseBody struct {
	rc   io.ReadCloser
	link *attemptLink
}

func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.link.release()
	}
	return n, err
}

func (b *responseBody) Close() error {
	err := b.rc.Close()
	b.link.release()
	return err
}

// upgradedBody is the body of a 101 Switching Protocols response, which is
// also the connection's writing side (see http.Response.Body).
type upgradedBody struct {
	responseBody
	w io.Writer
}

func (b *upgradedBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// wrapResponseBody makes resp's body release l when done with.
func wrapResponseBody(resp *http.Response, l *attemptLink) {
	switch {
	case resp.Body == nil || resp.Body == http.NoBody:
		resp.Body = http.NoBody
		l.release()
	case resp.StatusCode == http.StatusSwitchingProtocols:
		if w, ok := resp.Body.(io.Writer); ok {
			resp.Body = &upgradedBody{responseBody: responseBody{rc: resp.Body, link: l}, w: w}
			return
		}
		resp.Body = &responseBody{rc: resp.Body, link: l}
	default:
		resp.Body = &responseBody{rc: resp.Body, link: l}
	}
}

// settle drains and closes the body of a response that a later attempt
// superseded, so that its connection can serve the next attempt, and puts
// what it read in its place: should a policy settle on this response after
// all, its caller still reads the body (or its first maxDrain bytes followed
// by an error).
func settle(resp *http.Response) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDrain+1))
	_ = resp.Body.Close()
	if err == nil && len(data) <= maxDrain {
		resp.Body = io.NopCloser(bytes.NewReader(data))
		return
	}
	if err == nil {
		data, err = data[:maxDrain], errSuperseded
	}
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{err}))
}

// discard drains (up to maxDrain) and closes the body of a response nobody
// will read.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
