package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// DefaultMaxKeys is the MaxKeys of a Memory store whose options leave it zero.
const DefaultMaxKeys = 1 << 20

// DefaultSweepInterval is how often, at most, each shard of a Memory store
// looks for idle keys when its options leave SweepInterval zero.
const DefaultSweepInterval = time.Minute

// numShards is how many independently locked parts a Memory store has.
const numShards = 64

// touchGrain is how often, at most, requests that change nothing (those
// rejected, and reads) record a key's last use: it spares most of them a
// map write, and eviction needs no finer order than that.
const touchGrain = int64(time.Millisecond)

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
	// Evictions, when set, is the counter the store adds its evictions to
	// (see Memory), so that several stores can share one; nil means a
	// counter of the store's own. Memory.Evictions reads it.
	Evictions *atomic.Uint64
}

// Memory is a Store that keeps each key's state in this process. It is safe
// for concurrent use: keys are spread over 64 shards, each with its own
// mutex, so requests for different keys rarely contend.
//
// Memory is bounded: it never holds more than MaxKeys keys (DefaultMaxKeys,
// 1 << 20, by default). A key is idle once its state is back to its full
// quota (under the Limit of its last admitted request), which is the state
// a new key starts with; idle keys are dropped by a sweep of their shard
// that requests run at most once per SweepInterval, and dropping one
// changes no decision.
//
// A full store never refuses a new key: the new key is decided by its own
// limit, as any new key is, and room is made for it. First the store sweeps
// for idle keys (the new key's shard, then the others it can lock without
// waiting); if none is idle, it evicts the least recently used (by its last
// request, admitted or not, to the millisecond) of a sample of up to 8 keys,
// drawn from the new key's shard and the shards after it that it can lock
// without waiting. When it can lock no shard that holds a key, the new key's
// state is not kept. Evicting a busy key, one still short of its full quota,
// is the price of the bound: if that key comes back, it starts afresh with a
// full quota, so over the eviction it may be admitted up to one Capacity
// more than its limit allows. Idle keys go first because forgetting them
// costs nothing, and the least recently used next because a key that keeps
// sending is the one whose state matters; keys flooding the store with a
// request each are the ones evicted. Evictions counts the busy keys
// forgotten this way (and new keys not kept); a store that evicts often is
// too small for its keys.
//
// Each key costs about 185 bytes with a key of 11 bytes, and for SlidingLog
// about 80 more plus 8 bytes per timestamp held (at most Limit); see
// BenchmarkKeyed. The memory a store holds is about MaxKeys times that; a
// Limiter hands it no key longer than MaxKeyLen+1 bytes.
type Memory struct {
	clock     clock.Clock
	seed      maphash.Seed
	maxKeys   int64 // 0: no cap
	sweep     int64 // nanoseconds between sweeps of a shard
	keys      atomic.Int64
	evictions *atomic.Uint64
	shards    [numShards]shard
}

type shard struct {
	mu sync.Mutex // protects everything below
	m  map[string]entry
	// nextIdle is a lower bound of the instants at which the shard's keys
	// become idle: no sweep before it can drop anything. It is written
	// under mu and read without it by a full store looking for idle keys.
	nextIdle  atomic.Int64
	lastSweep int64    // when the shard was last swept, or first held a key
	_         [64]byte // keeps shards on separate cache lines
}

// entry is one key's state and the instant of its last request.
type entry struct {
	state
	used int64
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store configured by opts. Every
// MemoryOptions value is usable, so it returns no error.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{clock: clock.Or(opts.Clock), seed: maphash.MakeSeed(), sweep: int64(opts.SweepInterval), evictions: opts.Evictions}
	switch {
	case opts.MaxKeys == 0:
		m.maxKeys = DefaultMaxKeys
	case opts.MaxKeys > 0:
		m.maxKeys = int64(opts.MaxKeys)
	}
	if m.sweep <= 0 {
		m.sweep = int64(DefaultSweepInterval)
	}
	if m.evictions == nil {
		m.evictions = new(atomic.Uint64)
	}
	for i := range m.shards {
		m.shards[i].m = make(map[string]entry)
		m.shards[i].nextIdle.Store(math.MaxInt64)
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
	i := int(maphash.String(m.seed, key) % numShards)
	sh := &m.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now-sh.lastSweep >= m.sweep && now >= sh.nextIdle.Load() {
		m.sweepShard(sh, now)
	}
	e, found := sh.m[key]
	ok := found && e.alg == p.alg
	if !ok {
		e.state = fresh(p, now)
	}
	d := e.decide(p, int64(n), now)
	if !d.Allowed || n == 0 {
		if ok && now-e.used >= touchGrain {
			e.used = now
			sh.m[key] = e // only used has changed
		}
		return d, nil
	}
	e.used = max(e.used, now)
	if !found {
		if !m.reserveKey(i, now) {
			return d, nil // decided, but not kept: see Memory
		}
		key = strings.Clone(key) // do not keep the caller's backing array
	}
	sh.m[key] = e
	if next := sh.nextIdle.Load(); e.full < next {
		if next == math.MaxInt64 {
			sh.lastSweep = now // the shard was empty: the sweep interval starts now
		}
		sh.nextIdle.Store(e.full)
	}
	return d, nil
}

// Len returns how many keys the store holds.
func (m *Memory) Len() int { return int(m.keys.Load()) }

// Evictions returns how many keys the store has evicted before they were
// idle, and new keys it could not keep (see Memory), plus those of the
// stores that share its MemoryOptions.Evictions counter.
func (m *Memory) Evictions() uint64 { return m.evictions.Load() }
