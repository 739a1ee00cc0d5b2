package gateway

import (
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/telemetry"
)

// grpcFallback answers, with rt's static fallback, a gRPC call whose
// route could not answer it (err: refused by its breaker or concurrency
// limit, failed, timed out, or the upstream's failing grpc-status), and
// returns the reason for the log; it returns "" and writes nothing when
// rt has no static fallback, or err is the client's own doing (its request
// broke off or passed server.max_body_bytes, it left, or its call was
// idle): those get the gateway's own answer. The caller has written
// nothing yet.
func grpcFallback(w http.ResponseWriter, rt *route, err error) string {
	f := rt.life.fallback
	if f == nil || !f.GRPCStatic || errorIsClients(err) {
		return ""
	}
	_, reason := answer.GRPCClassify(err)
	writeGRPCStatic(w, f, reason)
	rt.metrics.Fallback(telemetry.FallbackStatic)
	return "fallback:" + reason
}

// errorIsClients reports whether a call ended with err by its client's
// doing (see classify), not its route's or upstream's.
func errorIsClients(err error) bool {
	for _, e := range []error{errClientBody, errBodyTooLarge, errClientGone, errGRPCIdle} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// writeGRPCStatic writes the static answer f to a gRPC call (see
// config.Fallback.GRPCStatus) that failed with reason: HTTP 200 and
// Content-Type application/grpc; for a code other than OK, grpc-status and
// grpc-message (f's, else reason) in the Trailers-Only form, as
// writeGRPCError answers; for OK, one message (f's body when its
// content_type is application/grpc, else an empty one), then grpc-status
// 0 (and f's grpc-message, when given) as trailers.
func writeGRPCStatic(w http.ResponseWriter, f *config.Fallback, reason string) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	code := codes.Code(f.GRPCCode)
	if code != codes.OK {
		msg := f.GRPCMessage
		if msg == "" {
			msg = reason
		}
		h.Set(hdrGRPCStatus, strconv.Itoa(int(code)))
		h.Set(hdrGRPCMessage, encodeGRPCMessage(msg))
		w.WriteHeader(http.StatusOK)
		return
	}
	var body string
	if isGRPC(f.ContentType) {
		body = f.Body
	}
	msg := make([]byte, 5, 5+len(body)) // uncompressed, then the length
	binary.BigEndian.PutUint32(msg[1:], uint32(len(body)))
	msg = append(msg, body...)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(msg)
	h.Set(http.TrailerPrefix+hdrGRPCStatus, "0")
	if f.GRPCMessage != "" {
		h.Set(http.TrailerPrefix+hdrGRPCMessage, encodeGRPCMessage(f.GRPCMessage))
	}
}
