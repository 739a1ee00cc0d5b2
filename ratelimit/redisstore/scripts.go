package redisstore

import (
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

// The scripts. Each decision is exactly one of them, run atomically by
// Redis on one key (KEYS[1]) with Redis's own clock.
//
// Arguments, the same for every script:
//
//	ARGV[1] limit   events per period (integer, >= 1)
//	ARGV[2] period  microseconds (may have a fraction)
//	ARGV[3] burst   bucket capacity (integer, >= 1; Limit when Burst is 0)
//	ARGV[4] n       events requested (integer, >= 0)
//	ARGV[5] nonce   unique per call, for sliding-log members
//
// Reply, the same for every script: {allowed (0|1), remaining,
// retry_after_us (-1: n exceeds the capacity, never), reset_after_us}.
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
// A rejected request never writes quota: the scripts return before any
// write, except that the sliding log drops entries that have left the
// window, which changes no decision.

// prelude reads the clock and the arguments.
const prelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local key = KEYS[1]
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
  tokens = math.min(burst, tonumber(v[1]) + math.max(0, now - ts) * rate)
  ts = math.max(ts, now)
end
if n == 0 or n > tokens then
  local ok, retry = 1, 0
  if n > burst then ok, retry = 0, -1
  elseif n > 0 then ok, retry = 0, math.ceil((n - tokens) / rate) end
  return {ok, math.floor(tokens), retry, math.ceil((burst - tokens) / rate)}
end
tokens = tokens - n
local reset = math.ceil((burst - tokens) / rate)
redis.call('HSET', key, 'tk', tokens, 'ts', ts)
redis.call('PEXPIRE', key, math.max(1, math.ceil(reset / 1000)))
return {1, math.floor(tokens), 0, reset}
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
  b = math.max(0, tonumber(v[1]) - math.max(0, now - ts) / interval)
  ts = math.max(ts, now)
end
if n == 0 or b + n > burst then
  local ok, retry = 1, 0
  if n > burst then ok, retry = 0, -1
  elseif n > 0 then ok, retry = 0, math.ceil((b + n - burst) * interval) end
  return {ok, math.floor(burst - b), retry, math.ceil(b * interval)}
end
b = b + n
local reset = math.ceil(b * interval)
redis.call('HSET', key, 'b', b, 'ts', ts)
redis.call('PEXPIRE', key, math.max(1, math.ceil(reset / 1000)))
return {1, math.floor(burst - b), 0, reset}
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
  level = math.max(0, tonumber(v[1]) - math.max(0, now - ts) * rate)
  ts = math.max(ts, now)
end
if n == 0 or level + n > burst then
  local ok, retry = 1, 0
  if n > burst then ok, retry = 0, -1
  elseif n > 0 then ok, retry = 0, math.ceil((level + n - burst) / rate) end
  return {ok, math.floor(burst - level), retry, math.ceil(level / rate)}
end
level = level + n
local reset = math.ceil(level / rate)
redis.call('HSET', key, 'lv', level, 'ts', ts)
redis.call('PEXPIRE', key, math.max(1, math.ceil(reset / 1000)))
return {1, math.floor(burst - level), 0, reset}
`

// fixedWindowScript: windows aligned to multiples of Period on Redis's clock
// (from the Unix epoch); at most Limit events per window. State: a hash with
// w (the window's index) and c (its count). A window recorded later than
// now (a clock that went back) stays current. The key expires at the
// window's end.
const fixedWindowScript = prelude + `
local w = math.floor(now / period)
local c = 0
local v = redis.call('HMGET', key, 'w', 'c')
if v[1] and tonumber(v[1]) >= w then
  w = tonumber(v[1])
  c = tonumber(v[2])
end
local wend = math.ceil((w + 1) * period - now)
if n == 0 or c + n > limit then
  local ok, retry, reset = 1, 0, 0
  if n > limit then ok, retry = 0, -1
  elseif n > 0 then ok, retry = 0, wend end
  if c > 0 then reset = wend end
  return {ok, limit - c, retry, reset}
end
c = c + n
redis.call('HSET', key, 'w', w, 'c', c)
redis.call('PEXPIRE', key, math.max(1, math.ceil(wend / 1000)))
return {1, limit - c, 0, wend}
`

// slidingLogScript: a log of the admitted events in a sorted set (score: the
// Redis time in µs; member: the call's nonce and the event's index, so that
// two calls in one microsecond, or n events of one call, each count). An
// event counts while now < its time + Period. Rejected requests are never
// recorded. A log whose newest event is later than now (a clock that went
// back) is read at that event's time. The key expires when the newest event
// leaves the window.
const slidingLogScript = prelude + `
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if last[2] then now = math.max(now, tonumber(last[2])) end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
local count = redis.call('ZCARD', key)
if n == 0 or count + n > limit then
  local ok, retry, reset = 1, 0, 0
  if n > limit then ok, retry = 0, -1
  elseif n > 0 then
    local e = redis.call('ZRANGE', key, count + n - limit - 1, count + n - limit - 1, 'WITHSCORES')
    ok, retry = 0, math.ceil(tonumber(e[2]) + period - now)
  end
  if count > 0 then reset = math.ceil(tonumber(last[2]) + period - now) end
  return {ok, limit - count, retry, reset}
end
for i = 1, n do
  redis.call('ZADD', key, now, ARGV[5] .. ':' .. i)
end
local reset = math.ceil(period)
redis.call('PEXPIRE', key, math.max(1, math.ceil(reset / 1000)))
return {1, limit - count - n, 0, reset}
`

// slidingWindowScript: the weighted two-window counter. Windows are aligned
// as for the fixed window; the estimate of the last Period is
// p·(1 - elapsed/Period) + c, where elapsed is the time into the current
// window, c its count and p the previous window's, and a request is
// admitted when estimate + n <= Limit. State: a hash with w (the current
// window's index), c and p. The key expires when its counts no longer weigh:
// at the end of the window after the one it was last written in.
const slidingWindowScript = prelude + `
local w = math.floor(now / period)
local c, p = 0, 0
local v = redis.call('HMGET', key, 'w', 'c', 'p')
if v[1] then
  local sw = tonumber(v[1])
  if sw >= w then
    w = sw
    now = math.max(now, w * period)
    c, p = tonumber(v[2]), tonumber(v[3])
  elseif sw == w - 1 then
    p = tonumber(v[2])
  end
end
local elapsed = now - w * period
local est = p * (1 - elapsed / period) + c
local ok, retry = 1, 0
if n > limit then ok, retry = 0, -1
elseif n > 0 and est + n > limit then
  ok = 0
  if c + n <= limit then
    retry = math.ceil((1 - (limit - c - n) / p) * period - elapsed)
  else
    retry = math.ceil((2 - (limit - n) / c) * period - elapsed)
  end
end
if ok == 1 and n > 0 then
  c = c + n
  est = est + n
  redis.call('HSET', key, 'w', w, 'c', c, 'p', p)
  redis.call('PEXPIRE', key, math.max(1, math.ceil((2 * period - elapsed) / 1000)))
end
local reset = 0
if c > 0 then reset = math.ceil(2 * period - elapsed)
elseif p > 0 then reset = math.ceil(period - elapsed) end
return {ok, math.max(0, math.floor(limit - est)), retry, reset}
`

// script is one algorithm's Lua script and the suffix of its key.
type script struct {
	lua    *rueidis.Lua
	suffix string
	window bool // the limit's size is Limit (a window), not Burst (a bucket)
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
		fixedWindow:   script{lua: rueidis.NewLuaScript(fixedWindowScript), suffix: "fw", window: true},
		slidingLog:    script{lua: rueidis.NewLuaScript(slidingLogScript), suffix: "log", window: true},
		slidingWindow: script{lua: rueidis.NewLuaScript(slidingWindowScript), suffix: "sw", window: true},
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
