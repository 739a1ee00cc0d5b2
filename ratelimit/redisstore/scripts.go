package redisstore

import (
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

// The scripts. Each call is exactly one of them, run atomically by Redis on
// one key (KEYS[1]) with Redis's own clock. Every script is batched: it
// decides one or more requests, in order, at one instant, exactly as if
// they had been sent one after the other within one microsecond; a batch of
// one is the common case. A rejected request consumes nothing, so a later,
// smaller request of the same batch may still be admitted. The state is read
// once and written once (if anything was admitted).
//
// Arguments, the same for every script:
//
//	ARGV[1]  limit   events per period (integer, >= 1)
//	ARGV[2]  period  microseconds (may have a fraction)
//	ARGV[3]  burst   bucket capacity (integer, >= 1; Limit when Burst is 0)
//	ARGV[4]  nonce   unique per call, for sliding-log members
//	ARGV[5…] n       events requested by each request (integer, >= 0)
//
// Reply, the same for every script: four integers per request, in order:
// allowed (0|1), remaining, retry_after_us (-1: n exceeds the capacity,
// never), reset_after_us.
//
// All arithmetic is on numbers (tonumber), never on strings. Times are
// integer microseconds from TIME (about 1.8e15 today, exact in a double up to
// 9e15). Numbers passed to redis.call are converted by Redis with full
// precision, so fractional tokens are stored as they are, not truncated;
// Lua's own tostring (%.14g) is never used on a stored value. Replies are
// rounded explicitly (math.floor / math.ceil) because Redis truncates Lua
// numbers in replies. Redis 5 and later replicate the effects of scripts, so
// reading TIME before writing needs no redis.replicate_commands().
//
// Within a batch each request sees the state exactly as a separate call at
// the same instant would read it back: the values a separate call would
// store and reload are the values carried from one request to the next (for
// the sliding window, the estimate is recomputed from the counts for each
// request, as a separate call would). A batch in which nothing is admitted
// writes no quota: the scripts write only after an admission, except that
// the sliding log drops entries that have left the window, which changes no
// decision.

// prelude reads the clock and the arguments. Each script appends each
// request's decision to out (o values so far) at the end of its loop.
const prelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local key = KEYS[1]
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local out, o = {}, 0
`

// tokenBucketScript: a bucket of Burst tokens refilled continuously at
// Limit/Period; a request takes n tokens if there are n. State: a hash with
// tk (tokens, fractional) and ts (the Redis time of tk). A full bucket is no
// key at all: the key expires when the bucket would be full again.
const tokenBucketScript = prelude + `
local rate = limit / period
local tokens = burst
local ts = now
local v = redis.call('HMGET', key, 'tk', 'ts')
if v[1] then
  ts = tonumber(v[2])
  tokens = min(burst, tonumber(v[1]) + max(0, now - ts) * rate)
  ts = max(ts, now)
end
local taken = false
for i = 5, #ARGV do
  local n = tonumber(ARGV[i])
  local ok, retry = 1, 0
  if n == 0 or n > tokens then
    if n > burst then ok, retry = 0, -1
    elseif n > 0 then ok, retry = 0, ceil((n - tokens) / rate) end
  else
    tokens = tokens - n
    taken = true
  end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, floor(tokens), retry, ceil((burst - tokens) / rate)
  o = o + 4
end
if taken then
  redis.call('HSET', key, 'tk', tokens, 'ts', ts)
  redis.call('PEXPIRE', key, max(1, ceil(ceil((burst - tokens) / rate) / 1000)))
end
return out
`

// gcraScript: the generic cell rate algorithm (virtual scheduling). The
// emission interval is T = Period/Limit and the tolerance is Burst·T; a
// request for n is admitted when max(tat, now) + n·T - Burst·T <= now, and
// then tat becomes max(tat, now) + n·T. State: a hash with ts (a Redis time)
// and b, the backlog tat - ts counted in emission intervals, so that
// tat = ts + b·T. Keeping the backlog in intervals makes every admission an
// exact integer step and the comparison with Burst free of rounding, where
// an absolute tat in microseconds would round at every step (a double near
// 1.8e15 resolves 0.25 µs). The key expires at tat, when the full burst is
// available again.
const gcraScript = prelude + `
local interval = period / limit
local b = 0
local ts = now
local v = redis.call('HMGET', key, 'b', 'ts')
if v[1] then
  ts = tonumber(v[2])
  b = max(0, tonumber(v[1]) - max(0, now - ts) / interval)
  ts = max(ts, now)
end
local taken = false
for i = 5, #ARGV do
  local n = tonumber(ARGV[i])
  local ok, retry = 1, 0
  if n == 0 or b + n > burst then
    if n > burst then ok, retry = 0, -1
    elseif n > 0 then ok, retry = 0, ceil((b + n - burst) * interval) end
  else
    b = b + n
    taken = true
  end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, floor(burst - b), retry, ceil(b * interval)
  o = o + 4
end
if taken then
  redis.call('HSET', key, 'b', b, 'ts', ts)
  redis.call('PEXPIRE', key, max(1, ceil(ceil(b * interval) / 1000)))
end
return out
`

// leakyBucketScript: the leaky bucket as a meter. The bucket holds up to
// Burst and drains continuously at Limit/Period; a request pours n in if it
// fits and is rejected (not queued) if it would overflow. State: a hash with
// lv (the level, fractional) and ts. The key expires when the bucket is
// empty.
const leakyBucketScript = prelude + `
local rate = limit / period
local level = 0
local ts = now
local v = redis.call('HMGET', key, 'lv', 'ts')
if v[1] then
  ts = tonumber(v[2])
  level = max(0, tonumber(v[1]) - max(0, now - ts) * rate)
  ts = max(ts, now)
end
local taken = false
for i = 5, #ARGV do
  local n = tonumber(ARGV[i])
  local ok, retry = 1, 0
  if n == 0 or level + n > burst then
    if n > burst then ok, retry = 0, -1
    elseif n > 0 then ok, retry = 0, ceil((level + n - burst) / rate) end
  else
    level = level + n
    taken = true
  end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, floor(burst - level), retry, ceil(level / rate)
  o = o + 4
end
if taken then
  redis.call('HSET', key, 'lv', level, 'ts', ts)
  redis.call('PEXPIRE', key, max(1, ceil(ceil(level / rate) / 1000)))
end
return out
`

// fixedWindowScript: windows aligned to multiples of Period on Redis's clock
// (from the Unix epoch); at most Limit events per window. State: a hash with
// w (the window's index) and c (its count). A window recorded later than
// now (a clock that went back) stays current. The key expires at the
// window's end.
const fixedWindowScript = prelude + `
local w = floor(now / period)
local c = 0
local v = redis.call('HMGET', key, 'w', 'c')
if v[1] and tonumber(v[1]) >= w then
  w = tonumber(v[1])
  c = tonumber(v[2])
end
local wend = ceil((w + 1) * period - now)
local taken = false
for i = 5, #ARGV do
  local n = tonumber(ARGV[i])
  local ok, retry, reset = 1, 0, 0
  if n == 0 or c + n > limit then
    if n > limit then ok, retry = 0, -1
    elseif n > 0 then ok, retry = 0, wend end
  else
    c = c + n
    taken = true
  end
  if c > 0 then reset = wend end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, limit - c, retry, reset
  o = o + 4
end
if taken then
  redis.call('HSET', key, 'w', w, 'c', c)
  redis.call('PEXPIRE', key, max(1, ceil(wend / 1000)))
end
return out
`

// slidingLogScript: a log of the admitted events in a sorted set (score: the
// Redis time in µs; member: the call's nonce and the event's index within
// the call, so that two calls in one microsecond, or n events of one call,
// each count). An event counts while now < its time + Period. Rejected
// requests are never recorded. A log whose newest event is later than now (a
// clock that went back) is read at that event's time. The key expires when
// the newest event leaves the window. Events are added as they are admitted,
// so a later request of the batch finds them in the set.
const slidingLogScript = prelude + `
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest
if last[2] then
  newest = tonumber(last[2])
  now = max(now, newest)
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
local count = redis.call('ZCARD', key)
local event = 0
for i = 5, #ARGV do
  local n = tonumber(ARGV[i])
  if n == 0 or count + n > limit then
    local ok, retry, reset = 1, 0, 0
    if n > limit then ok, retry = 0, -1
    elseif n > 0 then
      local e = redis.call('ZRANGE', key, count + n - limit - 1, count + n - limit - 1, 'WITHSCORES')
      ok, retry = 0, ceil(tonumber(e[2]) + period - now)
    end
    if count > 0 then reset = ceil(newest + period - now) end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, limit - count, retry, reset
  else
    for j = 1, n do
      event = event + 1
      redis.call('ZADD', key, now, ARGV[4] .. ':' .. event)
    end
    count = count + n
    newest = now
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, limit - count, 0, ceil(period)
  end
  o = o + 4
end
if event > 0 then
  redis.call('PEXPIRE', key, max(1, ceil(ceil(period) / 1000)))
end
return out
`

// slidingWindowScript: the weighted two-window counter. Windows are aligned
// as for the fixed window; the estimate of the last Period is
// p·(1 - elapsed/Period) + c, where elapsed is the time into the current
// window, c its count and p the previous window's, and a request is
// admitted when estimate + n <= Limit. State: a hash with w (the current
// window's index), c and p. The key expires when its counts no longer weigh:
// at the end of the window after the one it was last written in.
const slidingWindowScript = prelude + `
local w = floor(now / period)
local c, p = 0, 0
local v = redis.call('HMGET', key, 'w', 'c', 'p')
if v[1] then
  local sw = tonumber(v[1])
  if sw >= w then
    w = sw
    now = max(now, w * period)
    c, p = tonumber(v[2]), tonumber(v[3])
  elseif sw == w - 1 then
    p = tonumber(v[2])
  end
end
local elapsed = now - w * period
local taken = false
for i = 5, #ARGV do
  local n = tonumber(ARGV[i])
  local est = p * (1 - elapsed / period) + c
  local ok, retry = 1, 0
  if n > limit then ok, retry = 0, -1
  elseif n > 0 and est + n > limit then
    ok = 0
    if c + n <= limit then
      retry = ceil((1 - (limit - c - n) / p) * period - elapsed)
    else
      retry = ceil((2 - (limit - n) / c) * period - elapsed)
    end
  end
  if ok == 1 and n > 0 then
    c = c + n
    est = est + n
    taken = true
  end
  local reset = 0
  if c > 0 then reset = ceil(2 * period - elapsed)
  elseif p > 0 then reset = ceil(period - elapsed) end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, max(0, floor(limit - est)), retry, reset
  o = o + 4
end
if taken then
  redis.call('HSET', key, 'w', w, 'c', c, 'p', p)
  redis.call('PEXPIRE', key, max(1, ceil((2 * period - elapsed) / 1000)))
end
return out
`

// script is one algorithm's Lua script and the suffix of its key.
type script struct {
	lua    *rueidis.Lua
	suffix string
	nonce  bool // the script needs a nonce unique to the call (the sliding log)
}

// scripts holds one compiled script per algorithm (client-side SHA-1;
// EVALSHA, then EVAL on NOSCRIPT, as rueidis.Lua.Exec does).
type scripts struct {
	tokenBucket, gcra, leakyBucket, fixedWindow, slidingLog, slidingWindow script
}

func newScripts() *scripts {
	return &scripts{
		tokenBucket:   script{lua: rueidis.NewLuaScript(tokenBucketScript), suffix: "tb"},
		gcra:          script{lua: rueidis.NewLuaScript(gcraScript), suffix: "gcra"},
		leakyBucket:   script{lua: rueidis.NewLuaScript(leakyBucketScript), suffix: "lb"},
		fixedWindow:   script{lua: rueidis.NewLuaScript(fixedWindowScript), suffix: "fw"},
		slidingLog:    script{lua: rueidis.NewLuaScript(slidingLogScript), suffix: "log", nonce: true},
		slidingWindow: script{lua: rueidis.NewLuaScript(slidingWindowScript), suffix: "sw"},
	}
}

// forAlgorithm returns the script of a (GCRA when a is empty), or nil for
// an unknown algorithm.
func (s *scripts) forAlgorithm(a ratelimit.Algorithm) *script {
	switch a {
	case ratelimit.TokenBucket:
		return &s.tokenBucket
	case ratelimit.GCRA, "":
		return &s.gcra
	case ratelimit.LeakyBucket:
		return &s.leakyBucket
	case ratelimit.FixedWindow:
		return &s.fixedWindow
	case ratelimit.SlidingLog:
		return &s.slidingLog
	case ratelimit.SlidingWindow:
		return &s.slidingWindow
	}
	return nil
}
