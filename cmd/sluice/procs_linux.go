package main

import (
	"os"
	"runtime"

	"github.com/sluicehq/sluice/config"
)

// spareP gives the Go runtime one P (see runtime.GOMAXPROCS) more than the
// gateway runs event loops, when cfg runs them (server.engine: loop) and
// the GOMAXPROCS environment variable does not set the count, and returns
// how many loops to run: as many as the runtime had Ps (one per CPU the
// process may use, by default). It returns 0, and changes nothing,
// otherwise: the gateway then runs one loop per P.
//
// Each loop holds its P while it waits in epoll_wait. With no P to spare,
// the runtime's monitor (sysmon) takes a waiting loop's P back after 20 µs
// to run the rest of the gateway (timers, the goroutine engine, HTTP/2
// bridges), wakes a thread for it, and then polls every 20 µs for a while;
// the loop, woken by its sockets, finds its P gone and waits for one. With
// one P to spare, the rest runs there and the loops keep theirs.
func spareP(cfg *config.Config) int {
	if cfg.Server.Engine != "loop" || os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(n + 1)
	return n
}
