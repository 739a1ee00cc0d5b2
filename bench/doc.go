// Package bench measures sluice against its peers, side by side.
//
// Every benchmark is named Benchmark<Area>/<library>, so one command shows
// sluice and the peers in the same run:
//
//	cd bench && go test -run '^$' -bench . -benchmem -cpu 1,2 -count 10 | tee new.txt
//	benchstat new.txt
//
// The Redis benchmarks need a redis-server: set REDIS_ADDR, or have
// redis-server on the PATH and one is started on a free loopback port.
// This module is separate so that the main module never depends on a peer.
package bench
