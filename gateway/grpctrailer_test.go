package gateway_test

import (
	"bytes"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGRPCRequestTrailers sends gRPC calls whose request ends with
// trailers (HTTP/2 allows them; gRPC's clients seldom send them), streamed
// and held whole (a method that may be retried): the upstream gets them
// after the request's message. (They were dropped.)
func TestGRPCRequestTrailers(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("X-Got-Trailer", r.Trailer.Get("X-Checksum"))
			w.Header().Set("X-Got-Body", hex.EncodeToString(body))
			w.Header().Set("Trailer", "Grpc-Status")
			if err != nil {
				w.Header().Set("X-Got-Body", err.Error())
			}
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte{0, 0, 0, 0, 0})
			w.Header().Set("Grpc-Status", "0")
		}))
		up.Config.ErrorLog = log.New(io.Discard, "", 0)
		up.Config.Protocols = new(http.Protocols)
		up.Config.Protocols.SetUnencryptedHTTP2(true)
		up.Start()
		t.Cleanup(up.Close)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: grpc
    upstream: up
    grpc: {idempotent: [/svc.S/Held]}
    policies: {retry: {}}
`, engine, up.URL))
		c := protoClient(t, "h2c", nil, "")
		msg := []byte("\x00\x00\x00\x00\x02hi")
		for _, method := range []string{"Streamed", "Held"} {
			req, err := http.NewRequest(http.MethodPost, gw.URL+"/svc.S/"+method, io.NopCloser(bytes.NewReader(msg)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			req.Trailer = http.Header{"X-Checksum": {"c0ffee"}}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get("X-Got-Trailer"); got != "c0ffee" || resp.Header.Get("X-Got-Body") != hex.EncodeToString(msg) || resp.Trailer.Get("Grpc-Status") != "0" {
				t.Errorf("%s: the upstream got trailer %q and body %q (status %q), want c0ffee after the message",
					method, got, resp.Header.Get("X-Got-Body"), resp.Trailer.Get("Grpc-Status"))
			}
		}
	})
}
