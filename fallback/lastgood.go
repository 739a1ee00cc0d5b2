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
	"github.com/sluicehq/sluice/internal/lru"
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
	key    func(context.Context) (string, bool)
	maxAge time.Duration

	mu     sync.Mutex      // protects values
	values *lru.Cache[any] // the keys kept, most recently used first
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
	maxKeys := opts.MaxKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	l := &LastGood{
		key:    opts.Key,
		maxAge: opts.MaxAge,
		values: lru.New[any](lru.Options{MaxEntries: maxKeys, MaxAge: opts.MaxAge, Clock: opts.Clock}),
	}
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
	l.mu.Lock()
	defer l.mu.Unlock()
	l.values.Put(key, r.Value, 0)
}

// Fallback returns the last good value of ctx's key, or an error matching
// ErrNoLastGood.
func (l *LastGood) Fallback(ctx context.Context, _ sluice.Result) (any, error) {
	key, ok := l.keyOf(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: the call has no key", ErrNoLastGood)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v, age, ok := l.values.Get(key)
	if !ok && age > 0 {
		return nil, fmt.Errorf("%w for key %q: the last one is %v old, over the %v MaxAge", ErrNoLastGood, key, age, l.maxAge)
	}
	if !ok {
		return nil, fmt.Errorf("%w for key %q", ErrNoLastGood, key)
	}
	return v, nil
}

// Forget drops the value kept for key, if any.
func (l *LastGood) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.values.Remove(key)
}

// Len returns how many keys are kept, stale ones included until they are
// looked up or evicted.
func (l *LastGood) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.values.Len()
}
