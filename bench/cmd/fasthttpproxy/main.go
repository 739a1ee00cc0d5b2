// Command fasthttpproxy is the least a proxy on fasthttp (the engine of
// sluice's gateway) can do: read a request, send it to one upstream over a
// pool of keep-alive connections, send the response back. No policies, no
// header rewriting beyond dropping Connection, no streaming of large
// bodies. scripts/loadtest.sh measures it beside sluice to show what the
// engine costs by itself, and so how much of the gap to nginx is sluice's.
//
//	fasthttpproxy LISTEN UPSTREAM_HOST:PORT
package main

import (
	"fmt"
	"log"
	"os"

	"github.com/valyala/fasthttp"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: fasthttpproxy LISTEN UPSTREAM_HOST:PORT (for example 127.0.0.1:8081 127.0.0.1:8000)")
		os.Exit(2)
	}
	up := &fasthttp.HostClient{Addr: os.Args[2], MaxConns: 4096}
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Request.Header.Del("Connection")
			if err := up.Do(&ctx.Request, &ctx.Response); err != nil {
				ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			}
		},
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		NoDefaultContentType:  true,
	}
	log.Fatal(s.ListenAndServe(os.Args[1]))
}
