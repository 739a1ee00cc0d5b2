package gateway

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/answer"
)

// The gRPC over HTTP/2 wire format of what the gateway reads and writes of
// a gRPC call (gRPC's PROTOCOL-HTTP2.md): the request's content type and
// grpc-timeout, the answer's grpc-status and grpc-message, and the retry
// pushback.
const (
	hdrGRPCStatus   = "Grpc-Status"
	hdrGRPCMessage  = "Grpc-Message"
	hdrGRPCTimeout  = "Grpc-Timeout"
	hdrGRPCPushback = "Grpc-Retry-Pushback-Ms"
)

// isGRPC reports whether a request with this Content-Type is a gRPC call:
// application/grpc, alone or followed by '+' (a message format such as
// +proto) or ';' (parameters).
func isGRPC(contentType string) bool {
	rest, ok := strings.CutPrefix(contentType, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// maxGRPCTimeout is the longest grpc-timeout the gateway reads: the
// longest Duration (eight digits of hours, which the format allows, are
// longer).
const maxGRPCTimeout = time.Duration(math.MaxInt64)

// parseGRPCTimeout reads a grpc-timeout value: one to eight digits and a
// unit, H, M, S, m (milliseconds), u (microseconds) or n (nanoseconds). It
// reports false for any other value, which the gateway then ignores (as
// grpc-go's server does).
func parseGRPCTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 || v[0] == '+' || v[0] == '-' {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if n > int64(maxGRPCTimeout/unit) {
		return maxGRPCTimeout, true
	}
	return time.Duration(n) * unit, true
}

// formatGRPCTimeout writes d as a grpc-timeout value, in the finest unit
// that fits in eight digits, rounded up so that the upstream never gets
// less time than the gateway gives it; at least 1n.
func formatGRPCTimeout(d time.Duration) string {
	const maxDigits = 99999999
	d = max(d, time.Nanosecond)
	for _, u := range []struct {
		unit time.Duration
		c    byte
	}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}} {
		if n := (d + u.unit - 1) / u.unit; n <= maxDigits {
			return strconv.FormatInt(int64(n), 10) + string(u.c)
		}
	}
	return strconv.FormatInt(int64(min((d+time.Hour-1)/time.Hour, maxDigits)), 10) + "H"
}

// writeGRPCError answers a gRPC call the gateway stopped with err in the
// Trailers-Only form: HTTP 200 and one HEADERS frame with grpc-status
// (answer.GRPCClassify), grpc-message (see grpcMessage) and, when the answer
// has a retry hint (answer.RetryAfter), grpc-retry-pushback-ms (whole
// milliseconds) and Retry-After (whole seconds), both rounded up. It
// returns the reason for the log. The caller has written nothing yet.
func writeGRPCError(w http.ResponseWriter, err error) string {
	code, reason := answer.GRPCClassify(err)
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set(hdrGRPCStatus, strconv.Itoa(int(code)))
	if msg := grpcMessage(err, reason); msg != "" {
		h.Set(hdrGRPCMessage, encodeGRPCMessage(msg))
	}
	if d, ok := answer.RetryAfter(err); ok {
		h.Set(hdrGRPCPushback, strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10))
		h.Set("Retry-After", strconv.FormatInt(answer.RetryAfterSeconds(d), 10))
	}
	w.WriteHeader(http.StatusOK)
	return reason
}

// grpcMessage is the grpc-message of the gateway's answer to a call that
// ended with err, whose reason is reason: the upstream's own message when
// err is its failing status, else the reason, as the JSON body of other
// requests' errors names it (idle_timeout for a call ended idle); never
// err's text, which names targets and their addresses.
func grpcMessage(err error, reason string) string {
	if ge := (*answer.GRPCStatusError)(nil); errors.As(err, &ge) {
		return ge.Message
	}
	if errors.Is(err, errGRPCIdle) {
		return grpcIdleMessage
	}
	return reason
}

// encodeGRPCMessage percent-encodes a grpc-message value: every byte
// outside printable ASCII, and '%'.
func encodeGRPCMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(msg)+8), msg[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return msg
	}
	return string(b)
}

// decodeGRPCMessage undoes encodeGRPCMessage; a malformed escape is kept
// as it is.
func decodeGRPCMessage(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(n))
				i += 2
				continue
			}
		}
		b = append(b, v[i])
	}
	return string(b)
}

// grpcStatus reads the status of an upstream's gRPC answer from its
// trailers, or from its headers when the answer is Trailers-Only, and
// returns the error the route's policies see: nil for a code that is not
// a failure (answer.IsGRPCFailure), else a *answer.GRPCStatusError with
// the upstream's pushback or Retry-After. An answer without grpc-status
// (a target that broke off the call) reads as INTERNAL, as gRPC clients
// read it.
func grpcStatus(header, trailer http.Header) error {
	h := trailer
	if h.Get(hdrGRPCStatus) == "" {
		h = header
	}
	v := h.Get(hdrGRPCStatus)
	code := codes.Internal
	msg := "the upstream sent no grpc-status"
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		code, msg = codes.Code(n), decodeGRPCMessage(h.Get(hdrGRPCMessage))
	}
	if !answer.IsGRPCFailure(code) {
		return nil
	}
	ge := &answer.GRPCStatusError{Code: code, Message: msg}
	if ms, err := strconv.ParseInt(h.Get(hdrGRPCPushback), 10, 64); err == nil && ms > 0 {
		ge.RetryAfter = time.Duration(min(ms, int64(maxGRPCTimeout/time.Millisecond))) * time.Millisecond
	} else if ra, ok := answer.ParseRetryAfter(h.Get("Retry-After"), time.Now()); ok {
		ge.RetryAfter = ra
	}
	return ge
}

// grpcMethods is a route's grpc.idempotent: the calls its retry policy
// may send again.
type grpcMethods struct {
	methods  map[string]bool // full method names
	services map[string]bool // "/pkg.Service/" of a "/pkg.Service/*" entry
}

func newGRPCMethods(c *config.GRPC) grpcMethods {
	var m grpcMethods
	if c == nil {
		return m
	}
	for _, p := range c.Idempotent {
		if svc, ok := strings.CutSuffix(p, "/*"); ok {
			if m.services == nil {
				m.services = map[string]bool{}
			}
			m.services[svc+"/"] = true
			continue
		}
		if m.methods == nil {
			m.methods = map[string]bool{}
		}
		m.methods[p] = true
	}
	return m
}

// idempotent reports whether the call of the full method name path (the
// request's path, "/pkg.Service/Method") may be sent again.
func (m grpcMethods) idempotent(path string) bool {
	if m.methods[path] {
		return true
	}
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		return m.services[path[:i+1]]
	}
	return false
}
