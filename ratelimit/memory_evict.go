package ratelimit

import "math"

// evictSample is how many keys a full store compares to choose the least
// recently used one it evicts.
const evictSample = 8

// reserveKey makes room for one more key in shard own, whose lock is held:
// it counts the key and, if the store is full, sweeps for idle keys or else
// evicts one (see Memory). It reports false when it found no key to drop
// without waiting for a lock: the new key must then not be kept.
func (m *Memory) reserveKey(own int, now int64) bool {
	if m.maxKeys == 0 {
		m.keys.Add(1)
		return true
	}
	if m.tryCount() {
		return true
	}
	m.sweepFull(own, now)
	return m.tryCount() || m.evict(own, now)
}

// tryCount counts one more key if the store has room for it.
func (m *Memory) tryCount() bool {
	for {
		n := m.keys.Load()
		if n >= m.maxKeys {
			return false
		}
		if m.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// sweepFull sweeps the shards that may hold idle keys, own first (its lock
// is held), then the others it can lock without waiting, until the store
// has room for one more key.
func (m *Memory) sweepFull(own int, now int64) {
	for j := range numShards {
		if j > 0 && m.keys.Load() < m.maxKeys {
			return
		}
		sh := &m.shards[(own+j)%numShards]
		if now < sh.nextIdle.Load() || j > 0 && !sh.mu.TryLock() {
			continue
		}
		m.sweepShard(sh, now)
		if j > 0 {
			sh.mu.Unlock()
		}
	}
}

// evict drops one key to make room for a new one in shard own, whose lock
// is held: an idle key if the sample holds one, else the least recently
// used of the sample. The sample is up to evictSample keys, taken from own
// and then from the shards after it that it can lock without waiting (each
// map's iteration starts at a random place). The count of keys does not
// change: one goes, one comes. It reports false if it found no key.
func (m *Memory) evict(own int, now int64) bool {
	var (
		victim *shard // its lock is held when it is not own's
		key    string
		score  = int64(math.MaxInt64) // the victim's used, or MinInt64 if idle
		seen   int
	)
	home := &m.shards[own]
	for j := 0; j < numShards && seen < evictSample; j++ {
		sh := &m.shards[(own+j)%numShards]
		if sh != home && !sh.mu.TryLock() {
			continue
		}
		before := victim
		for k, e := range sh.m {
			if seen == evictSample {
				break
			}
			seen++
			if sc := e.score(now); sc < score {
				victim, key, score = sh, k, sc
			}
		}
		if victim != before && before != nil && before != home {
			before.mu.Unlock()
		}
		if victim != sh && sh != home {
			sh.mu.Unlock()
		}
	}
	if victim == nil {
		m.evictions.Add(1) // the new key's own state is the one not kept
		return false
	}
	delete(victim.m, key)
	if victim != home {
		victim.mu.Unlock()
	}
	if score != math.MinInt64 {
		m.evictions.Add(1)
	}
	return true
}

// score orders keys for eviction, the least first: an idle key before any
// other, then by the instant of the last request.
func (e *entry) score(now int64) int64 {
	if e.full <= now {
		return math.MinInt64
	}
	return e.used
}

// sweepShard drops the idle keys of sh. sh.mu must be held.
func (m *Memory) sweepShard(sh *shard, now int64) {
	next, dropped := int64(math.MaxInt64), int64(0)
	for k, e := range sh.m {
		if e.full <= now {
			delete(sh.m, k)
			dropped++
		} else {
			next = min(next, e.full)
		}
	}
	sh.nextIdle.Store(next)
	sh.lastSweep = now
	m.keys.Add(-dropped)
}
