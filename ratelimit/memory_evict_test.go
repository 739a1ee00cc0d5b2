package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFullStoreEvicts fills a store with busy keys: a new key is still
// admitted by its own limit, the least recently used key is evicted to make
// room, and the eviction is counted. The evicted key starts afresh if it
// comes back: that is the documented price of the bound.
func TestFullStoreEvicts(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 1, Period: time.Hour}
	m := NewMemory(MemoryOptions{MaxKeys: 3})
	ms := int64(time.Millisecond)
	for i, key := range []string{"a", "b", "c"} {
		if d, err := m.AllowNAt(key, l, 1, int64(i)*ms); err != nil || !d.Allowed {
			t.Fatalf("key %s: %+v, %v", key, d, err)
		}
	}
	// A rejected request is a use too: "a" is now the most recently used.
	if d, err := m.AllowNAt("a", l, 1, 5*ms); err != nil || d.Allowed {
		t.Fatalf("busy key a: %+v, %v; want a rejection", d, err)
	}
	if d, err := m.AllowNAt("d", l, 1, 10*ms); err != nil || !d.Allowed {
		t.Fatalf("new key in a full store: %+v, %v; want it admitted", d, err)
	}
	if m.Len() != 3 || m.Evictions() != 1 {
		t.Fatalf("%d keys, %d evictions; want 3 and 1", m.Len(), m.Evictions())
	}
	// "b", the least recently used, was evicted; "a" and "c" keep their state.
	for _, key := range []string{"a", "c", "d"} {
		if d, err := m.AllowNAt(key, l, 1, 11*ms); err != nil || d.Allowed {
			t.Fatalf("key %s after the eviction: %+v, %v; want a rejection", key, d, err)
		}
	}
	if d, err := m.AllowNAt("b", l, 1, 12*ms); err != nil || !d.Allowed {
		t.Fatalf("evicted key b: %+v, %v; want a fresh quota", d, err)
	}
	// Reads of a new key take no slot and evict nothing.
	if d, err := m.AllowNAt("e", l, 0, 13*ms); err != nil || !d.Allowed || m.Len() != 3 || m.Evictions() != 2 {
		t.Fatalf("reading a new key: %+v, %v, %d keys, %d evictions", d, err, m.Len(), m.Evictions())
	}
}

// TestFullStoreDropsIdleFirst fills a store with two busy keys and one that
// becomes idle: a new key takes the idle key's place, which is no eviction,
// and the busy keys keep their state.
func TestFullStoreDropsIdleFirst(t *testing.T) {
	busy := Limit{Limit: 1, Period: time.Hour}
	brief := Limit{Limit: 1, Period: time.Millisecond}
	m := NewMemory(MemoryOptions{MaxKeys: 3})
	steps := []struct {
		key string
		l   Limit
	}{{"a", busy}, {"idle", brief}, {"c", busy}}
	for i, s := range steps {
		if d, err := m.AllowNAt(s.key, s.l, 1, int64(i)); err != nil || !d.Allowed {
			t.Fatalf("key %s: %+v, %v", s.key, d, err)
		}
	}
	at := int64(2 * time.Millisecond) // "idle" is back to a full quota
	if d, err := m.AllowNAt("d", busy, 1, at); err != nil || !d.Allowed {
		t.Fatalf("new key: %+v, %v", d, err)
	}
	if m.Len() != 3 || m.Evictions() != 0 {
		t.Fatalf("%d keys, %d evictions; want 3 and 0", m.Len(), m.Evictions())
	}
	for _, key := range []string{"a", "c"} {
		if d, err := m.AllowNAt(key, busy, 1, at); err != nil || d.Allowed {
			t.Fatalf("busy key %s: %+v, %v; want a rejection", key, d, err)
		}
	}
}

// TestFloodKeepsHotKey floods a small store with distinct keys, one request
// each, while a hot key sends a request between every two of them: every
// new key is admitted, the store stays within MaxKeys, and the hot key gets
// exactly the decisions an unbounded store gives it, so its limit holds
// through the flood.
func TestFloodKeepsHotKey(t *testing.T) {
	const maxKeys, flood = 32, 5000
	l := Limit{Limit: 10, Period: time.Second}
	m := NewMemory(MemoryOptions{MaxKeys: maxKeys})
	ref := NewMemory(MemoryOptions{MaxKeys: -1})
	hotAdmitted := 0
	for i := range flood {
		at := int64(i) * int64(time.Millisecond)
		if d, err := m.AllowNAt(fmt.Sprint("flood-", i), l, 1, at); err != nil || !d.Allowed {
			t.Fatalf("flood key %d: %+v, %v; want it admitted", i, d, err)
		}
		at += int64(time.Millisecond / 2)
		got, err := m.AllowNAt("hot", l, 1, at)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.AllowNAt("hot", l, 1, at)
		if got != want {
			t.Fatalf("hot key at step %d: %+v, an unbounded store says %+v", i, got, want)
		}
		if got.Allowed {
			hotAdmitted++
		}
		if m.Len() > maxKeys {
			t.Fatalf("step %d: %d keys, MaxKeys %d", i, m.Len(), maxKeys)
		}
	}
	// Burst 10, then one every 100ms for 5s.
	if hotAdmitted != 10+flood/100-1 && hotAdmitted != 10+flood/100 {
		t.Fatalf("hot key admitted %d times over 5s at 10/s with a burst of 10", hotAdmitted)
	}
	if e := m.Evictions(); e == 0 || e > flood {
		t.Fatalf("%d evictions for %d new keys", e, flood)
	}
}

// TestFloodConcurrent floods a small store from several goroutines, so that
// evictions reach into shards other requests hold: every new key is
// admitted and the store never holds more than MaxKeys keys. Run with -race.
func TestFloodConcurrent(t *testing.T) {
	const maxKeys, perG, g = 16, 2000, 4
	l := Limit{Limit: 1, Period: time.Hour}
	shared := new(atomic.Uint64)
	m := NewMemory(MemoryOptions{MaxKeys: maxKeys, Evictions: shared})
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			for i := range perG {
				d, err := m.AllowNAt(fmt.Sprint(w, "-", i), l, 1, int64(i))
				if err != nil || !d.Allowed {
					t.Errorf("new key: %+v, %v", d, err)
					return
				}
				if n := m.Len(); n > maxKeys {
					t.Errorf("%d keys, MaxKeys %d", n, maxKeys)
					return
				}
			}
		})
	}
	wg.Wait()
	// Every key is busy for an hour: all but the last maxKeys went.
	if e := shared.Load(); e != g*perG-uint64(m.Len()) || m.Len() > maxKeys || m.Evictions() != e {
		t.Fatalf("%d evictions, %d keys; want %d in all", e, m.Len(), g*perG)
	}
}
