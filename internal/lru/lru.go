// Package lru is a map of keyed values bounded by count and by total cost,
// dropping the least recently used value first, with an optional maximum
// age measured on an injected clock. It starts no goroutines.
package lru

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Options configures a Cache.
type Options struct {
	// MaxEntries bounds how many values are kept; zero or less means 1.
	MaxEntries int
	// MaxCost bounds the sum of the costs of the values kept; zero means
	// no bound.
	MaxCost int
	// MaxAge is how long after it was put a value may be got; an older
	// one is dropped when it is looked up. Zero means no limit.
	MaxAge time.Duration
	// Clock measures the age of values; nil means clock.Real.
	Clock clock.Clock
}

// Cache keeps values of type V by string key, the most recently put or got
// first. It is not safe for concurrent use, except Evictions: its user
// guards it with a lock of its own.
type Cache[V any] struct {
	maxEntries int
	maxCost    int
	maxAge     int64 // nanoseconds; zero means no limit
	clock      clock.Clock

	m    map[string]*entry[V]
	head entry[V] // sentinel of a circular list, most recently used first
	cost int      // the costs of the values in m

	evictions atomic.Uint64 // values dropped to make room for others
}

// entry is one key's value in the list.
type entry[V any] struct {
	key        string
	v          V
	at         int64 // clock.Nanotime when v was put
	cost       int
	prev, next *entry[V]
}

// New returns an empty Cache configured by o.
func New[V any](o Options) *Cache[V] {
	c := &Cache[V]{maxEntries: max(o.MaxEntries, 1), maxCost: o.MaxCost, maxAge: int64(o.MaxAge),
		clock: clock.Or(o.Clock), m: map[string]*entry[V]{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// Put keeps v of the given cost for key, as its most recently used value,
// dropping the least recently used values (each counted in Evictions) while
// the bounds would be exceeded. A value costing more than MaxCost is not
// kept, and the one kept for key is dropped; Put then returns false.
// Replacing the value of a key kept, within the bounds, does not allocate.
func (c *Cache[V]) Put(key string, v V, cost int) bool {
	now := c.clock.Nanotime()
	e, ok := c.m[key]
	if ok {
		c.unlink(e)
		c.cost -= e.cost
		delete(c.m, key)
	}
	if c.maxCost > 0 && cost > c.maxCost {
		return false
	}
	for len(c.m) >= c.maxEntries || (c.maxCost > 0 && c.cost+cost > c.maxCost) {
		c.remove(c.head.prev)
		c.evictions.Add(1)
	}
	if e == nil {
		e = &entry[V]{key: key}
	}
	e.v, e.at, e.cost = v, now, cost
	c.m[key] = e
	c.cost += cost
	c.pushFront(e)
	return true
}

// Get returns the value kept for key and its age, making it the most
// recently used. ok is false when there is none or it is older than MaxAge:
// then such a value is dropped and age is its age (zero when there is none).
func (c *Cache[V]) Get(key string) (v V, age time.Duration, ok bool) {
	e, age := c.lookup(key)
	if e == nil {
		return v, age, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.v, age, true
}

// Peek is Get without making the value the most recently used (an older
// value is still dropped); Touch does that part.
func (c *Cache[V]) Peek(key string) (v V, age time.Duration, ok bool) {
	e, age := c.lookup(key)
	if e == nil {
		return v, age, false
	}
	return e.v, age, true
}

// Touch makes the value kept for key, if any, the most recently used.
func (c *Cache[V]) Touch(key string) {
	if e, ok := c.m[key]; ok {
		c.unlink(e)
		c.pushFront(e)
	}
}

// Remove drops the value kept for key, if any, and reports whether there
// was one. It is not counted in Evictions.
func (c *Cache[V]) Remove(key string) bool {
	e, ok := c.m[key]
	if ok {
		c.remove(e)
	}
	return ok
}

// Len returns how many values are kept, ones older than MaxAge included
// until they are looked up or evicted.
func (c *Cache[V]) Len() int { return len(c.m) }

// Cost returns the sum of the costs of the values kept.
func (c *Cache[V]) Cost() int { return c.cost }

// Evictions returns how many values Put dropped to make room for others.
// It is safe to call concurrently with the other methods.
func (c *Cache[V]) Evictions() uint64 { return c.evictions.Load() }

// lookup returns key's entry and its age, or nil when there is none (age
// zero) or it is older than maxAge (then it drops it and returns its age).
func (c *Cache[V]) lookup(key string) (*entry[V], time.Duration) {
	e, ok := c.m[key]
	if !ok {
		return nil, 0
	}
	age := c.clock.Nanotime() - e.at
	if c.maxAge > 0 && age > c.maxAge {
		c.remove(e)
		return nil, time.Duration(age)
	}
	return e, time.Duration(age)
}

// remove drops e from the map and the list.
func (c *Cache[V]) remove(e *entry[V]) {
	delete(c.m, e.key)
	c.cost -= e.cost
	c.unlink(e)
}

// unlink takes e out of the list.
func (c *Cache[V]) unlink(e *entry[V]) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

// pushFront puts e at the front of the list.
func (c *Cache[V]) pushFront(e *entry[V]) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}
