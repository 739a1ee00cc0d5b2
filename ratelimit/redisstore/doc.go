// Package redisstore is a ratelimit.Store on Redis, so that several
// processes (gateway replicas) share each limit exactly.
//
// # Decisions
//
// Every algorithm of package ratelimit is here, with the same decisions as
// its in-memory store (Allowed, Remaining, Limit, RetryNever; RetryAfter and
// ResetAfter to the microsecond): token bucket (fractional tokens, stored as
// numbers, never truncated), GCRA, leaky bucket as a meter, fixed window,
// sliding-window log and sliding-window counter. The guarantees are those
// documented in package ratelimit, across every process sharing the Redis:
// 64 callers on four separate clients admit exactly the limit of the exact
// algorithms, never one more (TestConcurrentReplicasAdmitExactlyTheLimit).
//
// Each decision is one Lua script, run atomically by Redis on one key and
// timed by Redis's own clock (TIME, in microseconds), so the clocks of the
// callers do not matter and time never moves backwards for a key. Scripts
// are sent with EVALSHA, and with EVAL when Redis answers NOSCRIPT (after a
// restart or SCRIPT FLUSH). All arithmetic in them is on numbers. A rejected
// request writes nothing; a sliding-log entry is recorded for each admitted
// event only, under a member unique to the call (a random per-Store nonce
// and a sequence number), so that events in the same microsecond all count.
// The scripts need Redis 5 or later (effects replication by default); they
// are tested with Redis 7.
//
// # Keys
//
// The key for a limit key K is {Prefix:K}:suffix, the suffix naming the
// algorithm (tb, gcra, lb, fw, log, sw). The braces are a Cluster hash tag:
// everything one decision touches is in one slot, so the store works on
// Redis Cluster (TestCluster runs three masters) as on one server. Each key
// is given an expiry (PEXPIRE) at the instant its quota is full again (for
// the windows: when its counts no longer weigh), so an idle key disappears
// and a missing key means a full quota.
//
// # When Redis cannot answer
//
// Each call to Redis is bounded by Options.Timeout (default 50ms). A call
// that fails or runs out is decided as Options.OnError says: FailOpen
// (admit), FailClosed (reject, with a RetryAfter) or Local (ask a Store of
// this process, such as a *ratelimit.Memory). A small circuit breaker around
// Redis, timed by Options.Clock, opens after Options.FailureThreshold
// consecutive failures (calls that fail together, as in one stall, count
// once); while it is open no call goes to Redis, so an outage costs about
// 0.1–0.2µs per decision instead of a timeout. After Options.OpenDuration one
// call probes Redis; if it is answered the circuit closes and Redis decides
// again. A call that ran out may still have been applied by Redis: a timeout
// is no proof that a script did not run.
//
// # Client
//
// The store uses github.com/redis/rueidis, chosen by measurement: the same
// token-bucket script by EVALSHA from 64 concurrent callers on 1024 keys
// against a local redis-server 7.0 on this project's 2-core machine
// (-cpu 2, parallelism 32) took
//
//	                       quiet machine     loaded machine
//	go-redis v9.23.0       15.0–17.7 µs/op   25–37 µs/op   13–16 allocs/op
//	rueidis  v1.0.79        8.1 µs/op        8.4–17 µs/op    2 allocs/op
//
// rueidis pipelines concurrent commands on one connection automatically, so
// 64 callers cost Redis and the kernel a fraction of the system calls that
// go-redis's pool of 64 connections does: about twice the decisions per
// second, with a sixth of the allocations. Its client also finds a Cluster
// or a Sentinel master by itself, so New takes a rueidis.Client for
// standalone, Sentinel and Cluster alike; Dial and DialClient make one.
//
// # Cost
//
// BenchmarkAllowN (64 callers, -cpu 2, Redis on the same 2 cores): 11–22 µs
// per decision, about 11 allocations (the script call, its arguments, the
// timeout); a single redis-server runs out of CPU first. With the circuit
// open (BenchmarkAllowNCircuitOpen): 80–190 ns and no allocation.
package redisstore
