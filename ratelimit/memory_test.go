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

func TestMaxKeys(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 1, Period: time.Second}
	m := NewMemory(MemoryOptions{MaxKeys: 3})
	for i, key := range []string{"a", "b", "c"} {
		if d, err := m.AllowNAt(key, l, 1, int64(i)); err != nil || !d.Allowed {
			t.Fatalf("key %s: %+v, %v", key, d, err)
		}
	}
	// The store is full of busy keys: a new key is refused, not admitted.
	d, err := m.AllowNAt("d", l, 1, 10)
	if !errors.Is(err, ErrFull) || d.Allowed {
		t.Fatalf("new key in a full store: %+v, %v; want ErrFull", d, err)
	}
	// A known key still gets answers.
	if d, err := m.AllowNAt("a", l, 1, 10); err != nil || d.Allowed {
		t.Fatalf("busy key a: %+v, %v; want a rejection", d, err)
	}
	// Rejections and reads do not take a slot.
	if d, err := m.AllowNAt("e", l, 0, 10); err != nil || !d.Allowed || m.Len() != 3 {
		t.Fatalf("reading a new key: %+v, %v, %d keys", d, err, m.Len())
	}
	// Once "a" is back to a full quota it is idle and makes room.
	at := int64(time.Second)
	if d, err := m.AllowNAt("d", l, 1, at); err != nil || !d.Allowed {
		t.Fatalf("new key once a is idle: %+v, %v", d, err)
	}
	if m.Len() > 3 {
		t.Fatalf("%d keys, MaxKeys 3", m.Len())
	}
	// "a" starts afresh, which is what it would have had anyway.
	if d, err := m.AllowNAt("a", l, 1, 3*at); err != nil || !d.Allowed {
		t.Fatalf("key a again: %+v, %v", d, err)
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
