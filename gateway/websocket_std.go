package gateway

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/tracing"
)

// isStdWebSocket reports whether r, which net/http parsed, is a WebSocket
// handshake: an HTTP/1.1 GET without a body whose Upgrade names websocket
// and whose Connection names upgrade (see isWebSocket).
func isStdWebSocket(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.ProtoMinor == 1 && r.Method == http.MethodGet && r.ContentLength == 0 &&
		http1.HasToken([]byte(strings.Join(r.Header.Values("Upgrade"), ", ")), "websocket") &&
		http1.HasToken([]byte(strings.Join(r.Header.Values("Connection"), ", ")), "upgrade")
}

// errNoHijack is the error of a handshake whose connection net/http would
// not give up.
var errNoHijack = errors.New("gateway: the connection cannot be taken over")

// serveStdWebSocket serves a WebSocket handshake on rt on a net/http
// server (HTTP/1.1 on the TLS listener), as serveWebSocket does on the
// goroutine engine (obs records it): the rate limit first, then the handshake, then, after
// a 101, the connection taken from net/http (hijacked). It returns the
// reason for the log ("" when the upstream's answer was passed on) and,
// after a 101, carry, which carries the connection until it ends: the
// handshake is recorded first, as on the goroutine engine, so that a
// WebSocket's lifetime never counts as a request's duration.
func (g *Gateway) serveStdWebSocket(w http.ResponseWriter, r *http.Request, st *state, rt *route, obs *observation) (reason string, carry func()) {
	xff, err := stdLimit(w, r, st, rt)
	if err != nil {
		return writeStdError(w, err), nil
	}
	uri := r.URL.RequestURI() // the origin form (see serveWebSocket)
	fwdHost, fwdProto := stdForwarded(r, st)
	call, up, resp, err := g.wsOpen(rt, obs, func(host string, span *tracing.Attempt) []byte {
		return wsRequestHead(wsHandshakeFrom{uri: []byte(uri), host: []byte(r.Host), headers: stdHeaders(r.Header),
			connection: []byte(strings.Join(r.Header.Values("Connection"), ", ")), xff: xff,
			fwdHost: []byte(fwdHost), fwdProto: []byte(fwdProto), id: obs.id, rules: rt.rules}, host, span)
	})
	if err != nil {
		return writeStdError(w, err), nil
	}
	if call == nil {
		return wsStdPassRefusal(w, resp, up, rt.rules), nil
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		call.abandon(up)
		return writeStdError(w, errNoHijack), nil
	}
	_ = conn.SetDeadline(time.Time{}) // the server's deadlines were the request's
	var client net.Conn = conn
	if brw.Reader.Buffered() > 0 {
		client = &bufConn{Conn: conn, r: brw.Reader}
	}
	if _, err := conn.Write(wsSwitchingHead(resp, rt.rules)); err != nil {
		_ = conn.Close()
		call.abandon(up)
		return answer.ClientClosed, nil
	}
	return "", func() { call.carry(client, up) }
}

// wsStdPassRefusal passes on a target's answer other than 101 to a
// handshake, as wsPassRefusal does, and closes up.
func wsStdPassRefusal(w http.ResponseWriter, resp *http.Response, up net.Conn, rules *routeRules) string {
	body, ok := wsRefusalBody(resp)
	_ = up.Close()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write(answer.AppendJSON(nil, answer.UpstreamError, 0))
		return answer.UpstreamError
	}
	copyEndToEnd(w.Header(), resp.Header)
	if rules != nil {
		rules.response.apply(w.Header())
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	if resp.StatusCode >= 500 {
		return answer.UpstreamStatus
	}
	return ""
}

// stdHeaders yields the headers of h one line at a time.
func stdHeaders(h http.Header) func(yield func(k, v []byte) bool) {
	return func(yield func(k, v []byte) bool) {
		for k, vs := range h {
			for _, v := range vs {
				if !yield([]byte(k), []byte(v)) {
					return
				}
			}
		}
	}
}
