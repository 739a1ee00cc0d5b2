package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLocalAllow is the single-key hot path: Local.Allow on the real
// clock, in parallel on one key. "admit" never runs out, so every call is a
// compare-and-swap; "reject" is exhausted, so calls only read.
func BenchmarkLocalAllow(b *testing.B) {
	for _, tc := range []struct {
		name string
		l    Limit
	}{
		{"admit", Limit{Limit: 1 << 40, Period: time.Second}},
		{"reject", Limit{Limit: 1, Period: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			x, err := NewLocal(tc.l, LocalOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					x.Allow()
				}
			})
		})
	}
}

// BenchmarkShardedAllow is Sharded.Allow on the real clock, in parallel on
// one key: "admit" never runs out, so most calls only decrement their
// shard; "reject" is exhausted, so every call goes to the shared state and
// scans the shards.
func BenchmarkShardedAllow(b *testing.B) {
	for _, tc := range []struct {
		name string
		l    Limit
	}{
		{"admit", Limit{Limit: 1 << 40, Period: time.Second}},
		{"reject", Limit{Limit: 1, Period: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			x, err := NewSharded(tc.l, ShardedOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					x.Allow()
				}
			})
		})
	}
}

// BenchmarkLimiterAcquire is a Limiter over the default Memory store, on one
// key, in parallel.
func BenchmarkLimiterAcquire(b *testing.B) {
	l, err := New(Options{Limit: Limit{Limit: 1 << 40, Period: time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := WithKey(context.Background(), "client")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Acquire(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMemoryAllowN is Memory.AllowN on one key on the real clock, in
// parallel: "admit" never runs out; "reject" is exhausted.
func BenchmarkMemoryAllowN(b *testing.B) {
	for _, tc := range []struct {
		name string
		l    Limit
	}{
		{"admit", Limit{Limit: 1 << 40, Period: time.Second}},
		{"reject", Limit{Limit: 1, Period: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := NewMemory(MemoryOptions{})
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := m.AllowN(ctx, "client", tc.l, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMemoryFlood is a full Memory store of 4096 busy keys asked for a
// new key on every call, so that every call evicts one; it reports the
// evictions per call. The one allocation is the new key's copy.
func BenchmarkMemoryFlood(b *testing.B) {
	const maxKeys, numKeys = 4096, 1 << 18
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("flood:", i)
	}
	l := Limit{Limit: 1, Period: time.Hour}
	m := NewMemory(MemoryOptions{MaxKeys: maxKeys})
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.AllowN(context.Background(), keys[next.Add(1)%numKeys], l, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(m.Evictions())/float64(b.N), "evictions/op")
}

// BenchmarkKeyed fills a Memory store with 1M keys ("user:0" to
// "user:999999", one request each) and reports the heap each key costs,
// then measures AllowN on random keys among them, in parallel.
func BenchmarkKeyed(b *testing.B) {
	const numKeys = 1_000_000
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("user:", i)
	}
	for _, alg := range allAlgorithms {
		b.Run(string(alg), func(b *testing.B) {
			l := Limit{Algorithm: alg, Limit: 1 << 30, Period: time.Hour}
			m := NewMemory(MemoryOptions{MaxKeys: -1})
			before := heapInUse()
			for _, k := range keys {
				if _, err := m.AllowN(context.Background(), k, l, 1); err != nil {
					b.Fatal(err)
				}
			}
			perKey := float64(heapInUse()-before) / numKeys
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 1))
				for pb.Next() {
					if _, err := m.AllowN(context.Background(), keys[rng.IntN(numKeys)], l, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(perKey, "bytes/key")
			runtime.KeepAlive(m)
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
