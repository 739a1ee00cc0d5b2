package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// ErrFull is returned by Memory when a request would add a key
// beyond MaxKeys and no idle key can be evicted to make room. The request is
// not admitted; a Limiter then does what its OnError says.
var ErrFull = errors.New("ratelimit: memory store is full")

// DefaultMaxKeys is the MaxKeys of a Memory store whose options leave it zero.
const DefaultMaxKeys = 1 << 20

// DefaultSweepInterval is how often, at most, each shard of a Memory store
// looks for idle keys when its options leave SweepInterval zero.
const DefaultSweepInterval = time.Minute

// numShards is how many independently locked parts a Memory store has.
const numShards = 64

// MemoryOptions configures a Memory store. The zero value is usable.
type MemoryOptions struct {
	// Clock is the clock AllowN reads; nil means clock.Real.
	Clock clock.Clock
	// MaxKeys caps how many keys the store holds. Zero means DefaultMaxKeys;
	// a negative value means no cap.
	MaxKeys int
	// SweepInterval is how often, at most, a shard of the store drops its
	// idle keys (the sweep is run by the requests that reach the shard, not
	// by a goroutine). Zero or less means DefaultSweepInterval.
	SweepInterval time.Duration
}

// Memory is a Store that keeps each key's state in this process. It is safe
// for concurrent use: keys are spread over 64 shards, each with its own
// mutex, so requests for different keys rarely contend.
//
// Memory is bounded. A key is idle once its state is back to its full quota
// (under the Limit of its last admitted request); idle keys are dropped by a
// sweep of their shard that requests run at most once per SweepInterval, and
// dropping one changes no decision, since a new key starts with a full
// quota. When MaxKeys keys are held, a request for a new key first sweeps
// for idle keys (its own shard, then the others it can lock without
// waiting); if none is idle, the request is refused with an error wrapping
// ErrFull rather than forgetting the state of a busy key, so the store never
// silently admits more than a limit allows.
//
// Each key costs about 167 bytes with a key of 11 bytes, and for SlidingLog
// about 80 more plus 8 bytes per timestamp held (at most Limit); see
// BenchmarkKeyed.
type Memory struct {
	clock   clock.Clock
	seed    maphash.Seed
	maxKeys int64 // 0: no cap
	sweep   int64 // nanoseconds between sweeps of a shard
	keys    atomic.Int64
	shards  [numShards]shard
}

type shard struct {
	mu sync.Mutex // protects everything below
	m  map[string]state
	// nextIdle is a lower bound of the instants at which the shard's keys
	// become idle: no sweep before it can drop anything.
	nextIdle  int64
	lastSweep int64    // when the shard was last swept, or first held a key
	_         [64]byte // keeps shards on separate cache lines
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store configured by opts.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{clock: clock.Or(opts.Clock), seed: maphash.MakeSeed(), sweep: int64(opts.SweepInterval)}
	switch {
	case opts.MaxKeys == 0:
		m.maxKeys = DefaultMaxKeys
	case opts.MaxKeys > 0:
		m.maxKeys = int64(opts.MaxKeys)
	}
	if m.sweep <= 0 {
		m.sweep = int64(DefaultSweepInterval)
	}
	for i := range m.shards {
		m.shards[i].m = make(map[string]state)
		m.shards[i].nextIdle = math.MaxInt64
	}
	return m
}

// AllowN decides whether n events may happen now on key under l, and
// consumes them if so. It never blocks; ctx is not used. See Store.
func (m *Memory) AllowN(_ context.Context, key string, l Limit, n int) (Decision, error) {
	return m.AllowNAt(key, l, n, m.clock.Nanotime())
}

// AllowNAt is AllowN at the instant now, a reading of the store's clock
// (clock.Nanotime, in nanoseconds). It lets tests use fixed instants. An
// instant earlier than one the key has already seen is treated as that one:
// time never moves backwards for a key.
func (m *Memory) AllowNAt(key string, l Limit, n int, now int64) (Decision, error) {
	p, err := l.params()
	if err != nil {
		return Decision{}, err
	}
	if n < 0 {
		return Decision{Limit: int(p.cap)}, errNegative(n)
	}
	sh := &m.shards[maphash.String(m.seed, key)%numShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now-sh.lastSweep >= m.sweep && now >= sh.nextIdle {
		m.sweepShard(sh, now)
	}
	s, ok := sh.m[key]
	if !ok || s.alg != p.alg {
		s = fresh(p, now)
	}
	d := s.decide(p, int64(n), now)
	if !d.Allowed || n == 0 {
		return d, nil
	}
	if !ok {
		if !m.reserveKey(sh, now) {
			return Decision{Limit: d.Limit}, ErrFull
		}
		key = strings.Clone(key) // do not keep the caller's backing array
	}
	sh.m[key] = s
	if sh.nextIdle == math.MaxInt64 {
		sh.lastSweep = now // the shard was empty: the sweep interval starts now
	}
	sh.nextIdle = min(sh.nextIdle, s.full)
	return d, nil
}

// Len returns how many keys the store holds.
func (m *Memory) Len() int { return int(m.keys.Load()) }

// reserveKey counts one more key, sweeping for idle keys if the store is
// full. It reports false if there is no room. sh.mu must be held.
func (m *Memory) reserveKey(own *shard, now int64) bool {
	if m.maxKeys == 0 {
		m.keys.Add(1)
		return true
	}
	if m.keys.Add(1) <= m.maxKeys {
		return true
	}
	m.keys.Add(-1)
	if now >= own.nextIdle {
		m.sweepShard(own, now)
	}
	for i := range m.shards {
		if m.keys.Load() < m.maxKeys {
			break
		}
		sh := &m.shards[i]
		if sh == own || !sh.mu.TryLock() {
			continue
		}
		if now >= sh.nextIdle {
			m.sweepShard(sh, now)
		}
		sh.mu.Unlock()
	}
	if m.keys.Add(1) <= m.maxKeys {
		return true
	}
	m.keys.Add(-1)
	return false
}

// sweepShard drops the idle keys of sh. sh.mu must be held.
func (m *Memory) sweepShard(sh *shard, now int64) {
	next, dropped := int64(math.MaxInt64), int64(0)
	for k, s := range sh.m {
		if s.full <= now {
			delete(sh.m, k)
			dropped++
		} else {
			next = min(next, s.full)
		}
	}
	sh.nextIdle, sh.lastSweep = next, now
	m.keys.Add(-dropped)
}
