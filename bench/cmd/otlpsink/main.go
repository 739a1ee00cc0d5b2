// Command otlpsink is the OTLP/HTTP collector that scripts/loadtest.sh
// runs sluice's tracing against: it accepts every POST to /v1/traces,
// reads the body and drops it, answering an empty (valid) protobuf
// ExportTraceServiceResponse. On exit (SIGINT, SIGTERM) it prints the
// number of exports and bytes received.
//
//	otlpsink LISTEN
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: otlpsink LISTEN (for example 127.0.0.1:4318)")
		os.Exit(2)
	}
	var exports, bytes atomic.Int64
	http.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exports.Add(1)
		bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		fmt.Printf("otlpsink: %d exports, %d bytes\n", exports.Load(), bytes.Load())
		os.Exit(0)
	}()
	log.Fatal(http.ListenAndServe(os.Args[1], nil))
}
