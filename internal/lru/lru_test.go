package lru

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// keys returns c's keys, most recently used first.
func keys[V any](c *Cache[V]) []string {
	var ks []string
	for e := c.head.next; e != &c.head; e = e.next {
		ks = append(ks, e.key)
	}
	return ks
}

func wantKeys[V any](t *testing.T, c *Cache[V], want ...string) {
	t.Helper()
	if got := fmt.Sprint(keys(c)); got != fmt.Sprint(want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	if len(c.m) != len(want) {
		t.Fatalf("map has %d keys, list %d", len(c.m), len(want))
	}
}

func TestPutGet(t *testing.T) {
	c := New[int](Options{MaxEntries: 3})
	if _, _, ok := c.Get("a"); ok {
		t.Fatal("Get of an empty cache found a value")
	}
	c.Put("a", 1, 0)
	c.Put("b", 2, 0)
	if v, _, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v; want 1, true", v, ok)
	}
	wantKeys(t, c, "a", "b")
	c.Put("b", 3, 0)
	if v, _, _ := c.Get("b"); v != 3 {
		t.Fatalf("Get(b) = %d after replacing, want 3", v)
	}
	wantKeys(t, c, "b", "a")
	if c.Len() != 2 || c.Evictions() != 0 {
		t.Fatalf("Len, Evictions = %d, %d; want 2, 0", c.Len(), c.Evictions())
	}
}

func TestEvictsLeastRecentlyUsedByCount(t *testing.T) {
	c := New[int](Options{MaxEntries: 2})
	c.Put("a", 1, 0)
	c.Put("b", 2, 0)
	c.Get("a") // b is now the least recently used
	c.Put("c", 3, 0)
	wantKeys(t, c, "c", "a")
	if c.Evictions() != 1 {
		t.Fatalf("Evictions = %d, want 1", c.Evictions())
	}
	c.Put("a", 4, 0) // a replacement evicts nothing
	wantKeys(t, c, "a", "c")
	if c.Evictions() != 1 {
		t.Fatalf("Evictions = %d after a replacement, want 1", c.Evictions())
	}
}

func TestEvictsByCost(t *testing.T) {
	c := New[int](Options{MaxEntries: 10, MaxCost: 10})
	c.Put("a", 1, 4)
	c.Put("b", 2, 4)
	c.Put("c", 3, 4) // 12 > 10: a goes
	wantKeys(t, c, "c", "b")
	if c.Cost() != 8 || c.Evictions() != 1 {
		t.Fatalf("Cost, Evictions = %d, %d; want 8, 1", c.Cost(), c.Evictions())
	}
	c.Put("d", 4, 10) // all must go
	wantKeys(t, c, "d")
	if c.Cost() != 10 || c.Evictions() != 3 {
		t.Fatalf("Cost, Evictions = %d, %d; want 10, 3", c.Cost(), c.Evictions())
	}
	c.Put("d", 5, 2) // a replacement's cost replaces the old one's
	if c.Cost() != 2 {
		t.Fatalf("Cost = %d after replacing, want 2", c.Cost())
	}
}

func TestTooCostlyIsNotKeptAndDropsTheOld(t *testing.T) {
	c := New[int](Options{MaxEntries: 10, MaxCost: 10})
	c.Put("a", 1, 5)
	c.Put("b", 2, 5)
	if c.Put("a", 3, 11) {
		t.Fatal("Put of a value over MaxCost returned true")
	}
	wantKeys(t, c, "b")
	if c.Cost() != 5 || c.Evictions() != 0 {
		t.Fatalf("Cost, Evictions = %d, %d; want 5, 0", c.Cost(), c.Evictions())
	}
}

func TestZeroMaxCostIsUnbounded(t *testing.T) {
	c := New[int](Options{MaxEntries: 2})
	if !c.Put("a", 1, 1<<40) {
		t.Fatal("Put with no MaxCost refused a value")
	}
	wantKeys(t, c, "a")
}

func TestMaxAge(t *testing.T) {
	fc := clock.NewFake(start)
	c := New[int](Options{MaxEntries: 2, MaxAge: time.Minute, Clock: fc})
	c.Put("a", 1, 3)
	fc.Advance(time.Minute)
	if _, age, ok := c.Get("a"); !ok || age != time.Minute {
		t.Fatalf("Get at MaxAge = %v, %v; want 1m, true", age, ok)
	}
	fc.Advance(time.Nanosecond)
	if _, age, ok := c.Peek("a"); ok || age != time.Minute+time.Nanosecond {
		t.Fatalf("Peek past MaxAge = %v, %v; want 1m0.000000001s, false", age, ok)
	}
	if _, age, ok := c.Get("a"); ok || age != 0 {
		t.Fatalf("Get of a dropped value = %v, %v; want 0, false", age, ok)
	}
	if c.Len() != 0 || c.Cost() != 0 || c.Evictions() != 0 {
		t.Fatalf("Len, Cost, Evictions = %d, %d, %d after a stale lookup; want 0, 0, 0", c.Len(), c.Cost(), c.Evictions())
	}
	c.Put("a", 2, 0) // putting again starts the age anew
	fc.Advance(30 * time.Second)
	if v, age, ok := c.Get("a"); !ok || v != 2 || age != 30*time.Second {
		t.Fatalf("Get = %d, %v, %v; want 2, 30s, true", v, age, ok)
	}
}

func TestZeroMaxAgeIsUnlimited(t *testing.T) {
	fc := clock.NewFake(start)
	c := New[int](Options{MaxEntries: 1, Clock: fc})
	c.Put("a", 1, 0)
	fc.Advance(1000 * time.Hour)
	if _, age, ok := c.Get("a"); !ok || age != 1000*time.Hour {
		t.Fatalf("Get = %v, %v; want 1000h, true", age, ok)
	}
}

func TestPeekAndTouch(t *testing.T) {
	c := New[int](Options{MaxEntries: 2})
	c.Put("a", 1, 0)
	c.Put("b", 2, 0)
	if v, _, ok := c.Peek("a"); !ok || v != 1 {
		t.Fatalf("Peek(a) = %d, %v; want 1, true", v, ok)
	}
	wantKeys(t, c, "b", "a") // Peek leaves the order
	c.Touch("a")
	wantKeys(t, c, "a", "b")
	c.Touch("missing")
	wantKeys(t, c, "a", "b")
}

func TestRemove(t *testing.T) {
	c := New[int](Options{MaxEntries: 3, MaxCost: 10})
	c.Put("a", 1, 3)
	c.Put("b", 2, 4)
	if !c.Remove("a") || c.Remove("a") {
		t.Fatal("Remove did not report once that a was kept")
	}
	wantKeys(t, c, "b")
	if c.Cost() != 4 || c.Evictions() != 0 {
		t.Fatalf("Cost, Evictions = %d, %d; want 4, 0", c.Cost(), c.Evictions())
	}
}

func TestMaxEntriesAtLeastOne(t *testing.T) {
	c := New[int](Options{})
	c.Put("a", 1, 0)
	c.Put("b", 2, 0)
	wantKeys(t, c, "b")
}

// TestBoundsHoldUnderChurn puts, gets and removes many keys and checks
// after each step that the bounds hold and that Len, Cost, the map and the
// list agree.
func TestBoundsHoldUnderChurn(t *testing.T) {
	c := New[int](Options{MaxEntries: 7, MaxCost: 50})
	for i := range 2000 {
		k := fmt.Sprint(i * 7919 % 23)
		switch i % 5 {
		case 0, 1, 2:
			c.Put(k, i, i%13)
		case 3:
			c.Get(k)
		case 4:
			c.Remove(k)
		}
		n, cost := 0, 0
		for e := c.head.next; e != &c.head; e = e.next {
			if c.m[e.key] != e {
				t.Fatalf("step %d: list entry %q is not the map's", i, e.key)
			}
			n++
			cost += e.cost
		}
		if n != c.Len() || n != len(c.m) || cost != c.Cost() || n > 7 || cost > 50 {
			t.Fatalf("step %d: list %d entries of cost %d, Len %d, Cost %d", i, n, cost, c.Len(), c.Cost())
		}
	}
}

func TestReplacingDoesNotAllocate(t *testing.T) {
	c := New[*int](Options{MaxEntries: 4, MaxCost: 100})
	v := new(int)
	c.Put("a", v, 1)
	c.Put("b", v, 1)
	if n := testing.AllocsPerRun(100, func() {
		c.Put("a", v, 2)
		c.Get("b")
	}); n != 0 {
		t.Fatalf("replacing a value and getting one allocate %v times, want 0", n)
	}
}
