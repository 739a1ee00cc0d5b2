package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// TestConcurrentOneKey runs many goroutines on one key at a frozen instant:
// every algorithm admits exactly its capacity, never one more.
func TestConcurrentOneKey(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l := Limit{Algorithm: alg, Limit: 37, Period: time.Second, Burst: 50}
			m := NewMemory(MemoryOptions{Clock: clock.NewFake(time.Time{})})
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 100 {
						d, err := m.AllowN(context.Background(), "k", l, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got, want := admitted.Load(), int64(l.Capacity()); got != want {
				t.Fatalf("admitted %d, want exactly %d", got, want)
			}
		})
	}
}

func TestIdleKeysSwept(t *testing.T) {
	l := Limit{Algorithm: GCRA, Limit: 10, Period: time.Second}
	m := NewMemory(MemoryOptions{MaxKeys: -1, SweepInterval: time.Minute})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
		if _, err := m.AllowNAt(keys[i], l, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if m.Len() != len(keys) {
		t.Fatalf("%d keys, want %d", m.Len(), len(keys))
	}
	// Before the sweep interval, nothing is dropped, even though every key
	// is idle after 100ms.
	for _, k := range keys {
		_, _ = m.AllowNAt(k, l, 0, int64(time.Second))
	}
	if m.Len() != len(keys) {
		t.Fatalf("%d keys before the sweep interval, want %d", m.Len(), len(keys))
	}
	// Requests after the interval sweep their shards; only the busy key stays.
	at := int64(time.Minute + time.Second)
	if _, err := m.AllowNAt("busy", l, 5, at); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		_, _ = m.AllowNAt(k, l, 0, at)
	}
	if m.Len() != 1 {
		t.Fatalf("%d keys after the sweep, want 1", m.Len())
	}
}

func TestMemoryErrors(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	for _, l := range []Limit{
		{},
		{Limit: 1},
		{Limit: 1, Period: time.Second, Burst: -1},
		{Algorithm: "nope", Limit: 1, Period: time.Second},
		{Limit: 1, Period: 1 << 62},
	} {
		if _, err := m.AllowNAt("k", l, 1, 0); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("limit %+v: %v, want ErrInvalidLimit", l, err)
		}
	}
	if _, err := m.AllowNAt("k", Limit{Limit: 1, Period: 1}, -1, 0); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("n = -1: %v, want ErrInvalidLimit", err)
	}
}

// TestStaleInstant gives a key an instant earlier than one it has seen: time
// does not move backwards, so nothing is admitted that was not there.
func TestStaleInstant(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l := Limit{Algorithm: alg, Limit: 2, Period: time.Second}
			m := NewMemory(MemoryOptions{})
			at := int64(10 * time.Second)
			if d, _ := m.AllowNAt("k", l, 2, at); !d.Allowed {
				t.Fatalf("first: %+v", d)
			}
			if d, _ := m.AllowNAt("k", l, 1, at-int64(5*time.Second)); d.Allowed {
				t.Fatalf("stale instant admitted: %+v", d)
			}
		})
	}
}

// TestAlgorithmChange starts a key afresh when its limit's algorithm changes.
func TestAlgorithmChange(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	a := Limit{Algorithm: GCRA, Limit: 1, Period: time.Second}
	b := Limit{Algorithm: SlidingLog, Limit: 1, Period: time.Second}
	if d, _ := m.AllowNAt("k", a, 1, 0); !d.Allowed {
		t.Fatal(d)
	}
	if d, _ := m.AllowNAt("k", b, 1, 0); !d.Allowed {
		t.Fatal(d)
	}
	if d, _ := m.AllowNAt("k", b, 1, 0); d.Allowed {
		t.Fatal(d)
	}
}
