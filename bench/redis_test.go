package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// BenchmarkRedisAllow measures exact rate-limit decisions shared through one
// local redis-server, from 64 concurrent callers on one key: sluice's
// store (group commit per key: the requests that arrive while a call for
// the key is in flight go together in the next call, one Lua script that
// decides them in order) against redis_rate (GCRA in Lua over go-redis, one
// script per decision). The server is REDIS_ADDR, or a redis-server started
// on a free loopback port.
func BenchmarkRedisAllow(b *testing.B) {
	addr := redisAddr(b)
	const callers = 64
	perSecond := 1_000_000_000
	b.Run("sluice", func(b *testing.B) {
		s, err := redisstore.Dial([]string{addr}, redisstore.Options{Prefix: "bench-sluice", Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		l := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: perSecond, Period: time.Second}
		ctx := context.Background()
		concurrent(b, callers, func() {
			if _, err := s.AllowN(ctx, "key", l, 1); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("redis_rate", func(b *testing.B) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: callers})
		defer rdb.Close()
		l := redis_rate.NewLimiter(rdb)
		lim := redis_rate.PerSecond(perSecond)
		ctx := context.Background()
		concurrent(b, callers, func() {
			if _, err := l.Allow(ctx, "bench-redis-rate:key", lim); err != nil {
				b.Error(err)
			}
		})
	})
}

// concurrent runs op from n goroutines (RunParallel with parallelism
// n/GOMAXPROCS) and reports allocations.
func concurrent(b *testing.B, n int, op func()) {
	b.SetParallelism(max(1, n/runtimeProcs()))
	parallel(b, op)
}

// redisAddr returns REDIS_ADDR, or starts a redis-server for the benchmark.
func redisAddr(b *testing.B) string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Skip("no REDIS_ADDR and no redis-server on the PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatal("redis-server did not start")
	return ""
}
