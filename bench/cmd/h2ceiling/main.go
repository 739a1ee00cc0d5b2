// Command h2ceiling is the least net/http's HTTP/2 server (the gateway's
// HTTP/2 engine) can do over TLS: with no upstream, answer every request
// with the body of scripts/loadtest.sh's upstream itself; with one, pass
// each request to it over a pool of keep-alive HTTP/1.1 connections
// (fasthttp's client, as the gateway's) and send its status and body back.
// No policies and no header copying. scripts/loadtest.sh measures both
// beside sluice over HTTP/2: what net/http's server costs by itself, and
// with the least proxying.
//
//	h2ceiling LISTEN CERT_FILE KEY_FILE [UPSTREAM_HOST:PORT]
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/valyala/fasthttp"
)

func main() {
	if len(os.Args) != 4 && len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: h2ceiling LISTEN CERT_FILE KEY_FILE [UPSTREAM_HOST:PORT]")
		os.Exit(2)
	}
	body := []byte("hello from the upstream\n")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})
	if len(os.Args) == 5 {
		up := &fasthttp.HostClient{Addr: os.Args[4], MaxConns: 4096}
		handler = func(w http.ResponseWriter, r *http.Request) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.Header.SetMethod(r.Method)
			req.SetRequestURI(r.RequestURI)
			req.Header.SetHost(r.Host)
			if err := up.Do(req, resp); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", string(resp.Header.ContentType()))
			w.WriteHeader(resp.StatusCode())
			_, _ = w.Write(resp.Body())
		}
	}
	srv := &http.Server{Addr: os.Args[1], Handler: handler}
	log.Fatal(srv.ListenAndServeTLS(os.Args[2], os.Args[3]))
}
