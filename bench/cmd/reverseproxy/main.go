// Command reverseproxy is the plain net/http/httputil.ReverseProxy that
// scripts/loadtest.sh measures sluice's gateway against.
//
//	reverseproxy LISTEN UPSTREAM
package main

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: reverseproxy LISTEN UPSTREAM (for example 127.0.0.1:8081 http://127.0.0.1:8000)")
		os.Exit(2)
	}
	u, err := url.Parse(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}
	log.Fatal(http.ListenAndServe(os.Args[1], rp))
}
