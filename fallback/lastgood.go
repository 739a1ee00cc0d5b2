package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// ErrNoLastGood is matched (errors.Is) by the error a LastGood level returns
// when it has no value to serve: none was recorded for the key, the one
// recorded is older than MaxAge, or the call has no key.
var ErrNoLastGood = errors.New("fallback: no last good value")

// DefaultMaxKeys is the number of keys a LastGood keeps when
// LastGoodOptions.MaxKeys is zero.
const DefaultMaxKeys = 1024

// LastGoodOptions configures a LastGood level.
type LastGoodOptions struct {
	// Key returns the key of a call from its context; ok=false means the
	// call's value is neither recorded nor served. Nil means one value for
	// every call.
	Key func(ctx context.Context) (key string, ok bool)
	// MaxAge is how long a recorded value may be served; an older one is
	// dropped. Zero means no limit.
	MaxAge time.Duration
	// MaxKeys bounds how many keys are kept; when a new key would exceed
	// it, the least recently used key (recorded or served) is evicted.
	// Zero means DefaultMaxKeys.
	MaxKeys int
	// Clock measures the age of values; nil means clock.Real.
	Clock clock.Clock
}

// LastGood is a Level that serves the value of the last successful call
// with the same key. It records values as successful Results pass through
// the Policy (it is an Observer), and keeps at most MaxKeys keys.
//
// The recorded value is given as is to every call that falls back to it:
// it must be safe to share (immutable, or safe for concurrent use). It is
// safe for concurrent use; one LastGood may serve several Policies.
type LastGood struct {
	key     func(context.Context) (string, bool)
	maxAge  time.Duration
	maxKeys int
	clock   clock.Clock

	mu   sync.Mutex        // protects m and the list
	m    map[string]*entry // the keys kept
	head entry             // sentinel of a circular list, most recently used first
}

// entry is one key's value in the LRU list.
type entry struct {
	key        string
	v          any
	at         int64 // clock.Nanotime when v was recorded
	prev, next *entry
}

var (
	_ Level    = (*LastGood)(nil)
	_ Observer = (*LastGood)(nil)
)

// NewLastGood returns a LastGood level configured by opts. For unusable
// opts it returns an error matching sluice.ErrInvalidOptions (errors.Is)
// that names every unusable option.
func NewLastGood(opts LastGoodOptions) (*LastGood, error) {
	ps := invalid.Problems{Prefix: "fallback: invalid last-good options"}
	if opts.MaxAge < 0 {
		ps.Addf("MaxAge %v is negative", opts.MaxAge)
	}
	if opts.MaxKeys < 0 {
		ps.Addf("MaxKeys %d is negative", opts.MaxKeys)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	l := &LastGood{
		key:     opts.Key,
		maxAge:  opts.MaxAge,
		maxKeys: opts.MaxKeys,
		clock:   clock.Or(opts.Clock),
		m:       make(map[string]*entry),
	}
	if l.maxKeys == 0 {
		l.maxKeys = DefaultMaxKeys
	}
	l.head.prev, l.head.next = &l.head, &l.head
	return l, nil
}

func (l *LastGood) keyOf(ctx context.Context) (string, bool) {
	if l.key == nil {
		return "", true
	}
	return l.key(ctx)
}

// Observe records r.Value as the last good value of ctx's key if r is a
// Success. Updating a key already kept does not allocate.
func (l *LastGood) Observe(ctx context.Context, r sluice.Result) {
	if r.Class != sluice.Success {
		return
	}
	key, ok := l.keyOf(ctx)
	if !ok {
		return
	}
	now := l.clock.Nanotime()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	if !ok {
		if len(l.m) >= l.maxKeys {
			l.remove(l.head.prev)
		}
		e = &entry{key: key}
		l.m[key] = e
	} else {
		l.unlink(e)
	}
	e.v, e.at = r.Value, now
	l.pushFront(e)
}

// Fallback returns the last good value of ctx's key, or an error matching
// ErrNoLastGood.
func (l *LastGood) Fallback(ctx context.Context, _ sluice.Result) (any, error) {
	key, ok := l.keyOf(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: the call has no key", ErrNoLastGood)
	}
	now := l.clock.Nanotime()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	if !ok {
		return nil, fmt.Errorf("%w for key %q", ErrNoLastGood, key)
	}
	if age := time.Duration(now - e.at); l.maxAge > 0 && age > l.maxAge {
		l.remove(e)
		return nil, fmt.Errorf("%w for key %q: the last one is %v old, over the %v MaxAge", ErrNoLastGood, key, age, l.maxAge)
	}
	l.unlink(e)
	l.pushFront(e)
	return e.v, nil
}

// Forget drops the value kept for key, if any.
func (l *LastGood) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[key]; ok {
		l.remove(e)
	}
}

// Len returns how many keys are kept, stale ones included until they are
// looked up or evicted.
func (l *LastGood) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// remove drops e from the map and the list. It requires l.mu.
func (l *LastGood) remove(e *entry) {
	delete(l.m, e.key)
	l.unlink(e)
}

// unlink takes e out of the list. It requires l.mu.
func (l *LastGood) unlink(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

// pushFront puts e at the front of the list. It requires l.mu.
func (l *LastGood) pushFront(e *entry) {
	e.prev, e.next = &l.head, l.head.next
	l.head.next.prev = e
	l.head.next = e
}
