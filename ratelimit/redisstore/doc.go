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
// Decisions are made by Lua scripts, each run atomically by Redis on one key
// and timed by Redis's own clock (TIME, in microseconds), so the clocks of
// the callers do not matter and time never moves backwards for a key.
// Scripts are sent with EVALSHA, and with EVAL when Redis answers NOSCRIPT
// (after a restart or SCRIPT FLUSH). All arithmetic in them is on numbers.
// A rejected request consumes nothing; a sliding-log entry is recorded for
// each admitted event only, under a member unique to the call (a random
// per-Store nonce, a sequence number and the event's index), so that events
// in the same microsecond all count. The scripts need Redis 5 or later
// (effects replication by default); they are tested with Redis 7.
//
// # Group commit
//
// One script call decides one or more requests for the same key and Limit.
// The first request for a key goes to Redis at once. Requests for that key
// (and Limit) that arrive while its call is in flight are queued, in
// arrival order, in one pending batch; when the call returns, the first of
// them leads the batch: it sends all of them in one script call, which
// decides them in order, atomically, at one instant, exactly as if they had
// been sent one after the other within one microsecond (each request is
// decided on the state the previous ones left, and a rejected one consumes
// nothing, so a later, smaller one may still be admitted). Requests that
// arrive meanwhile form the next batch. So at most one call per key and
// Limit is in flight from a Store, no request waits for more than the one
// call ahead of its own, and Redis reads and writes the key once per batch
// instead of once per request. TestBatchIsAppliedInOrder checks each
// decision of a batch of 101 against ratelimit.Memory given the same
// requests in the same order.
//
// A batch holds at most 128 requests; a request that finds the pending
// batch full goes to Redis alone, as every request did before batching. The
// circuit's half-open probe also goes alone. Requests for different keys,
// or for one key under different Limits, are never batched together: with
// many keys, batching rarely happens and changes nothing.
//
// A caller whose context ends while its request is queued returns ctx's
// error at once, and its request is never sent. Once the batch is sent,
// such a caller still returns at once, but Redis applies its request (as
// for a call that runs out of Options.Timeout); the caller leading the
// batch waits for the batch's answer (at most Options.Timeout) whatever its
// context, since the call is not its alone. A batch whose call fails is
// decided as Options.OnError says, request by request, and counts as one
// failure.
//
// # Keys
//
// The key for a limit key K is {Prefix:K}:suffix, the suffix naming the
// algorithm (tb, gcra, lb, fw, log, sw). The prefix has no ':' or brace,
// so stores of different prefixes never share a key. The braces are a
// Cluster hash tag: everything one decision touches is in one slot, so the
// store works on Redis Cluster (TestCluster runs three masters) as on one
// server. Each key is given an expiry (PEXPIRE) at the instant its quota
// is full again (for the windows: when its counts no longer weigh), so an
// idle key disappears and a missing key means a full quota.
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
// is no proof that a script did not run. A Store that Dial or DialClient
// returned while Redis could not be reached starts in such an outage and
// connects by itself once Redis answers, so a gateway replica can start
// during a Redis outage.
//
// # Client
//
// The store uses github.com/redis/rueidis, chosen by measurement against
// go-redis (BENCHMARKS.md at the repository's root): rueidis pipelines
// concurrent commands on one connection automatically, so many callers
// cost Redis and the kernel a fraction of the system calls that a pool of
// as many connections does. Its client also finds a Cluster
// or a Sentinel master by itself, so New takes a rueidis.Client for
// standalone, Sentinel and Cluster alike; Dial and DialClient make one.
// Through Sentinel (TestSentinel: three sentinels) the decisions are those
// of one server, and after a failover to a replica (TestSentinelFailover)
// the store decides by the new master within seconds, with the state the
// old one had replicated. Calls made during the switch may fail (and are
// decided by Options.OnError), and what the old master admits after the
// promotion, or had not yet replicated, is lost with it: a limit may admit
// a little more than its quota across a failover (replication is
// asynchronous). Set rueidis.SentinelOption.TopologyRefreshInterval:
// without it a client that misses the +switch-master event stays on the
// old master.
//
// # Cost
//
// Concurrent decisions on one key are group-committed: one script call
// decides a queued batch in order, so Redis runs one script per batch
// instead of one per request. On the real clock (Options.Clock nil) a call
// alone on its connection is written and read by its caller, and a
// caller's context that cannot be cancelled costs no allocation for the
// timeout (a reusable deadline in the pooled batch): 0–2 allocations per
// decision (the Redis key, when it is not the batch's last, and rueidis's
// reply). With the circuit open a decision makes no call and allocates
// nothing. Measured figures, against redis_rate in the same runs: BENCHMARKS.md.
package redisstore
