package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
	"github.com/sluicehq/sluice/ratelimit"
)

// ErrorMode says what a Store decides when Redis cannot answer: it is
// unreachable, too slow (Options.Timeout), answers with an error, or the
// store's circuit around Redis is open. In every mode a request for zero
// events is Allowed, and under FailOpen and FailClosed a request for more
// than the limit's Capacity is rejected with RetryAfter RetryNever, as Redis
// would. It is ratelimit's ErrorPolicy, so one value configures a Limiter
// and its Store alike.
type ErrorMode = ratelimit.ErrorPolicy

const (
	// FailOpen admits every request while Redis cannot answer: the Decision
	// is Allowed, with Remaining as for a fresh key (Capacity − n) and no
	// RetryAfter or ResetAfter. Availability over the limit. The zero value.
	FailOpen = ratelimit.FailOpen
	// FailClosed rejects every request while Redis cannot answer: the
	// Decision is not Allowed, Remaining is 0 and RetryAfter is how long the
	// circuit stays open (Options.OpenDuration when it is not open).
	FailClosed = ratelimit.FailClosed
	// Local asks Options.Fallback, a Store of this process (for example a
	// *ratelimit.Memory), and returns its answer: each replica then limits
	// on its own until Redis is back. Scale the fallback's limits down by
	// the number of replicas if their sum matters.
	Local = ratelimit.FailLocal
)

// Defaults for the zero fields of Options.
const (
	DefaultPrefix           = "sluice"
	DefaultTimeout          = 50 * time.Millisecond
	DefaultFailureThreshold = 5
	DefaultOpenDuration     = time.Second
)

// ErrInvalidOptions is matched (errors.Is) by the errors New, Dial and
// DialClient return for unusable options. It matches
// sluice.ErrInvalidOptions too.
var ErrInvalidOptions = invalid.Sentinel("redisstore: invalid options")

// Options configures a Store. The zero value is usable (fail open, 50ms per
// call, keys under "sluice").
type Options struct {
	// Prefix starts every key, as {Prefix:key}:suffix, so that stores of
	// different prefixes never share a key. It has no ':', '{' or '}'.
	// Empty means DefaultPrefix.
	Prefix string
	// Timeout bounds each call to Redis, on Clock. Zero means
	// DefaultTimeout; negative is invalid. A call that runs out counts as a
	// failure of Redis. On the real clock it is also the deadline of the
	// connection for a call alone on it; such a call that runs out closes
	// the connection, and rueidis dials a new one.
	Timeout time.Duration
	// OnError is what the store decides when Redis cannot answer. The zero
	// value is FailOpen.
	OnError ErrorMode
	// Fallback answers for Redis when OnError is Local; it is required then
	// and unused otherwise. Any ratelimit.Store will do.
	Fallback ratelimit.Store
	// FailureThreshold is how many consecutive failed calls open the circuit
	// around Redis. Calls that fail together (in flight at once, as in a
	// stall that times them all out) count as one. Zero means
	// DefaultFailureThreshold; negative is invalid.
	FailureThreshold int
	// OpenDuration is how long the circuit stays open before one call probes
	// Redis again. Zero means DefaultOpenDuration; negative is invalid.
	OpenDuration time.Duration
	// Clock times the circuit and Timeout; nil means clock.Real. Decisions
	// use Redis's clock, never this one.
	Clock clock.Clock
	// OnRedisError, if set, is called with each error from a call to Redis
	// (not for the calls the open circuit keeps from Redis), once per call
	// even when the call decided a batch of requests, after the decisions
	// are made and without any lock held. It must be safe for concurrent
	// use.
	OnRedisError func(error)
}

// Store is a ratelimit.Store that keeps every key's state in Redis, so that
// all the processes using one Redis (gateway replicas) share each limit
// exactly. Decisions are made by atomic Lua scripts on one key (one call
// for one request, or for a batch of requests for the same key), run with
// EVALSHA (EVAL when Redis answers NOSCRIPT) and timed by Redis's clock.
// Keys are {Prefix:key}:suffix, with the suffix naming the algorithm, so a
// key never leaves its Cluster slot; each key expires when its quota is full
// again, so idle keys cost no memory.
//
// A Store is safe for concurrent use. Requests for one key and Limit that
// arrive while a call for them is in flight are decided together in the
// next call (group commit, see the package documentation); calls for
// different keys are pipelined on one connection by rueidis.
type Store struct {
	client    rueidis.Client // nil when conn makes it
	conn      *connector     // set when DialClient returned before Redis could be reached
	owned     bool           // Close closes client (or conn's)
	scripts   *scripts
	clock     clock.Clock
	realClock bool // clock is clock.Real: Timeout can be a context deadline
	prefix    string
	timeout   time.Duration
	mode      ErrorMode
	fallback  ratelimit.Store
	onError   func(error)
	circuit   circuit
	nonce     string        // random, per Store: makes sliding-log members unique across replicas
	seq       atomic.Uint64 // per call: makes them unique within this Store

	seed     maphash.Seed // picks a key's shard
	shards   [shardCount]shard
	requests sync.Pool // of *request
	batches  sync.Pool // of *batch
	// queuedHook, if set (by tests), is called after a request is queued
	// behind a call in flight, without any lock held.
	queuedHook func()
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store that uses client, which may be a standalone, Sentinel
// or Cluster client (rueidis.NewClient picks from its ClientOption). The
// Store does not close client. For a nil client or unusable opts it returns
// an error matching sluice.ErrInvalidOptions and ErrInvalidOptions
// (errors.Is) that names every problem.
func New(client rueidis.Client, opts Options) (*Store, error) {
	ps := problems()
	if client == nil {
		ps.Addf("client is nil")
	}
	opts.check(&ps)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return build(client, opts)
}

// problems returns the Problems of a constructor's arguments.
func problems() invalid.Problems {
	return invalid.Problems{Prefix: ErrInvalidOptions.Error(), Sentinel: ErrInvalidOptions}
}

// check reports every unusable field of o to ps.
func (o Options) check(ps *invalid.Problems) {
	if o.Timeout < 0 {
		ps.Addf("Timeout is %v, want 0 or more", o.Timeout)
	}
	if o.FailureThreshold < 0 {
		ps.Addf("FailureThreshold is %d, want 0 or more", o.FailureThreshold)
	}
	if o.OpenDuration < 0 {
		ps.Addf("OpenDuration is %v, want 0 or more", o.OpenDuration)
	}
	if strings.ContainsAny(o.Prefix, ":{}") {
		// {Prefix:key} must name one prefix and one key: a prefix "a"
		// with the key "b:k" would share "a:b"'s key "k", and a brace
		// would end the Cluster hash tag early.
		ps.Addf("Prefix %q has ':', '{' or '}'", o.Prefix)
	}
	switch o.OnError {
	case FailOpen, FailClosed:
	case Local:
		if o.Fallback == nil {
			ps.Addf("OnError is Local but Fallback is nil")
		}
	default:
		ps.Addf("OnError %v is unknown", o.OnError)
	}
}

// build is New, without validation, for a client that may be nil (made
// later by a connector).
func build(client rueidis.Client, opts Options) (*Store, error) {
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("redisstore: reading a random nonce: %w", err)
	}
	s := &Store{
		client:   client,
		scripts:  newScripts(),
		clock:    clock.Or(opts.Clock),
		prefix:   opts.Prefix,
		timeout:  opts.Timeout,
		mode:     opts.OnError,
		fallback: opts.Fallback,
		onError:  opts.OnRedisError,
		nonce:    strconv.FormatUint(binary.LittleEndian.Uint64(seed[:]), 36),
		seed:     maphash.MakeSeed(),
	}
	s.requests.New = func() any { return &request{done: make(chan struct{}, 1)} }
	s.batches.New = func() any { return &batch{reqs: make([]*request, 0, 1), args: make([]string, 0, 5)} }
	s.realClock = s.clock == clock.Real
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	s.circuit = circuit{clock: s.clock, threshold: DefaultFailureThreshold, openFor: int64(DefaultOpenDuration)}
	if opts.FailureThreshold > 0 {
		s.circuit.threshold = int32(min(opts.FailureThreshold, 1<<30))
	}
	if opts.OpenDuration > 0 {
		s.circuit.openFor = int64(opts.OpenDuration)
	}
	return s, nil
}

// Dial connects to Redis at addrs ("host:port"; one address of a standalone
// server, or any of a Cluster's nodes, which is detected) and returns a
// Store that owns the connection: Close closes it. For a password, TLS or
// Sentinel use DialClient.
//
// A Redis that cannot be reached (the connection is refused, reset, or
// not set up within the dial timeout of rueidis, 5s by default) is an
// outage like any other: the Store is returned all the same and decides
// as Options.OnError says, each call failing at once, until it connects.
// Calls that find it unconnected start a connection attempt in the
// background, one at a time: with the circuit open, one per
// Options.OpenDuration. Dial fails when Redis answers but refuses the
// connection (a wrong password, for example), and, with an error as New's,
// for unusable options or no address.
func Dial(addrs []string, opts Options) (*Store, error) {
	ps := problems()
	if len(addrs) == 0 {
		ps.Addf("no Redis address")
	}
	opts.check(&ps)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return dial(rueidis.ClientOption{InitAddress: addrs}, opts)
}

// DialClient makes a rueidis client from co (client-side caching is turned
// off: the store does not use it) and returns a Store that owns it, as Dial
// does, connecting later when Redis cannot be reached yet. For unusable
// opts it returns an error as New's.
func DialClient(co rueidis.ClientOption, opts Options) (*Store, error) {
	ps := problems()
	opts.check(&ps)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return dial(co, opts)
}

// dial is DialClient for checked options.
func dial(co rueidis.ClientOption, opts Options) (*Store, error) {
	co.DisableCache = true
	client, err := rueidis.NewClient(co)
	var conn *connector
	if err != nil {
		if !unreachable(err) {
			return nil, fmt.Errorf("redisstore: connecting to %v: %w", co.InitAddress, err)
		}
		conn = &connector{co: co, lastErr: err}
	}
	s, err := build(client, opts)
	if err != nil {
		if client != nil {
			client.Close()
		}
		return nil, err
	}
	s.owned, s.conn = true, conn
	return s, nil
}

// Close closes the Redis connection if Dial or DialClient made it (or
// makes it later), and does nothing otherwise. AllowN must not be called
// after Close.
func (s *Store) Close() {
	switch {
	case !s.owned:
	case s.conn != nil:
		s.conn.close()
	default:
		s.client.Close()
	}
}

// CircuitOpen reports whether the store's circuit around Redis is open (or
// half-open): whether decisions are currently made by OnError instead of
// Redis, apart from the occasional probe.
func (s *Store) CircuitOpen() bool { return s.circuit.isOpen() }

// AllowN decides whether n events on key are allowed under l, and consumes
// them if so, in Redis. n may be zero to read the key's state. An invalid l
// or a negative n returns an error wrapping ratelimit.ErrInvalidLimit, and a
// ctx that ends before Redis answers returns ctx's error; neither is a
// failure of Redis. When Redis cannot answer the store decides as
// Options.OnError says, with a nil error for FailOpen and FailClosed and the
// Fallback's error for Local.
//
// While a call for key and l is in flight, the request waits for it and is
// then sent with the others that waited, in one call (at most one call
// ahead of its own). If ctx ends while it waits, AllowN returns ctx's error
// at once and the request is never sent; if ctx ends after it was sent,
// AllowN returns ctx's error at once but Redis still applies the request,
// unless this caller sends the batch, which it then does (bounded by
// Options.Timeout) before returning the decision.
func (s *Store) AllowN(ctx context.Context, key string, l ratelimit.Limit, n int) (ratelimit.Decision, error) {
	if err := l.Validate(); err != nil {
		return ratelimit.Decision{}, err
	}
	if n < 0 {
		return ratelimit.Decision{}, fmt.Errorf("%w: n is %d, want 0 or more", ratelimit.ErrInvalidLimit, n)
	}
	sc := s.scripts.forAlgorithm(l.Algorithm)
	ok, probe, wait := s.circuit.allow()
	if !ok {
		return s.degraded(ctx, key, l, n, wait)
	}
	g := group{key: key, limit: l}
	r := s.getRequest(n)
	var sh *shard
	role := alone // the half-open probe goes alone: it alone decides whether the circuit closes
	if !probe {
		sh = s.shard(key)
		role = s.join(sh, g, r)
	}
	var err error
	switch role {
	case leading, alone:
		b := s.getBatch()
		b.reqs = append(b.reqs, r)
		if role == alone {
			sh = nil
		}
		err = s.fly(ctx, sc, g, b, sh, true, probe)
	case waiting:
		if err = s.await(ctx, sh, r); err != nil {
			return ratelimit.Decision{}, err // r is back in the pool, or left to its batch's leader
		}
		if r.lead {
			err = s.fly(ctx, sc, g, r.batch, sh, false, false)
		}
	}
	if err != nil {
		s.putRequest(r)
		return ratelimit.Decision{}, err
	}
	d, answered, wait := r.d, r.answered, r.wait
	s.putRequest(r)
	if answered {
		return d, nil
	}
	return s.degraded(ctx, key, l, n, wait)
}

// errTimeout is the cause of a call to Redis that ran out of
// Options.Timeout.
var errTimeout = fmt.Errorf("no answer within the timeout: %w", context.DeadlineExceeded)

// degraded decides without Redis, as s.mode says. wait is how long the
// circuit stays open, if it is.
func (s *Store) degraded(ctx context.Context, key string, l ratelimit.Limit, n int, wait int64) (ratelimit.Decision, error) {
	if s.mode == Local {
		d, err := s.fallback.AllowN(ctx, key, l, n)
		if err != nil {
			return d, fmt.Errorf("redisstore: local fallback: %w", err)
		}
		return d, nil
	}
	capacity := l.Capacity()
	switch {
	case n == 0:
		return ratelimit.Decision{Allowed: true, Limit: capacity}, nil
	case n > capacity:
		return ratelimit.Decision{Limit: capacity, RetryAfter: ratelimit.RetryNever}, nil
	case s.mode == FailClosed:
		retry := time.Duration(wait)
		if retry <= 0 {
			retry = time.Duration(s.circuit.openFor)
		}
		return ratelimit.Decision{Limit: capacity, RetryAfter: retry}, nil
	}
	return ratelimit.Decision{Allowed: true, Limit: capacity, Remaining: capacity - n}, nil
}
