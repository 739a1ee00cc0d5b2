package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Group commit per key: while a script call for a key (and Limit) is in
// flight, further requests for it wait in one pending batch; when the call
// returns, the first of them leads the batch, which goes to Redis as one
// script call that decides every request in order, atomically. So no
// caller waits for more than one call ahead of its own, and Redis runs one
// script (one read and one write of the key) for a whole batch.

// maxBatch bounds the requests of one batch (one script call: 4+maxBatch
// arguments, 4·maxBatch integers in the reply). A request that finds the
// pending batch full goes to Redis alone, as it would without batching.
const maxBatch = 128

// shardCount is the number of independently locked parts of the table of
// keys in flight (a power of two).
const shardCount = 32

// group identifies the requests that may share a script call.
type group struct {
	key   string
	limit ratelimit.Limit
}

// shard is one part of the table of keys in flight.
type shard struct {
	mu sync.Mutex
	// inflight holds the groups with a call in flight, each with the batch
	// queued behind that call (nil while none is). Protected by mu.
	inflight map[group]*batch
	_        [48]byte // one cache line per shard
}

// role is what join made of a request.
type role uint8

const (
	leading role = iota // no call in flight for the group: the request goes now
	waiting             // queued in the pending batch
	alone               // the pending batch is full: the request goes alone
)

// request is one AllowN call's part in a batch. Requests are pooled.
type request struct {
	n    int
	done chan struct{} // capacity 1: the decision is in, or the request leads its batch

	// Protected by the shard's mu.
	batch  *batch // the batch the request is queued in
	queued bool   // in the pending batch, not yet sent (so it can leave)
	lead   bool   // first of its batch: its caller sends the batch

	// Written by the batch's leader before done is signalled.
	d        ratelimit.Decision
	answered bool  // Redis decided d
	wait     int64 // when not answered: how long the circuit stays open, if it was open
}

// batch is the requests of one script call, in order, with the reusable
// arguments of the call. Batches are pooled.
type batch struct {
	reqs  []*request
	args  []string
	limit ratelimit.Limit // the Limit that args[0:3] were formatted for
	keys  [1]string
	key   string // the limit key and suffix that keys[0] was made for
	sfx   string
	ctx   deadlineCtx // for the call, on the real clock, when the caller's context cannot be cancelled
}

// shard returns the part of the table that holds key.
func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&(shardCount-1)]
}

func (s *Store) getRequest(n int) *request {
	r := s.requests.Get().(*request)
	r.n = n
	return r
}

// putRequest returns r to the pool; r's done channel must be empty and no
// batch may refer to r any more.
func (s *Store) putRequest(r *request) {
	*r = request{done: r.done}
	s.requests.Put(r)
}

func (s *Store) getBatch() *batch { return s.batches.Get().(*batch) }

func (s *Store) putBatch(b *batch) {
	clear(b.reqs)
	b.reqs = b.reqs[:0]
	s.batches.Put(b)
}

// join puts r in g's pending batch if a call for g is in flight, and
// otherwise records that r's call is.
func (s *Store) join(sh *shard, g group, r *request) role {
	sh.mu.Lock()
	pending, inFlight := sh.inflight[g]
	if !inFlight {
		if sh.inflight == nil {
			sh.inflight = make(map[group]*batch)
		}
		sh.inflight[g] = nil
		sh.mu.Unlock()
		return leading
	}
	if pending == nil {
		pending = s.getBatch()
		sh.inflight[g] = pending
	}
	if len(pending.reqs) >= maxBatch {
		sh.mu.Unlock()
		return alone
	}
	pending.reqs = append(pending.reqs, r)
	r.batch, r.queued = pending, true
	sh.mu.Unlock()
	if s.queuedHook != nil {
		s.queuedHook()
	}
	return waiting
}

// await waits until r's decision is in or r leads its batch. If ctx ends
// first and r has not been sent, r leaves its batch and await returns ctx's
// error; if r has been sent, await returns ctx's error at once (Redis still
// applies the request, and r is left to the leader and the garbage
// collector), unless r leads the batch: then it returns nil, and its caller
// sends the batch.
func (s *Store) await(ctx context.Context, sh *shard, r *request) error {
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-r.done:
		return nil
	default:
	}
	sh.mu.Lock()
	if r.queued {
		b := r.batch
		i := slices.Index(b.reqs, r)
		b.reqs = slices.Delete(b.reqs, i, i+1)
		sh.mu.Unlock()
		s.putRequest(r)
		return fmt.Errorf("redisstore: %w", ctx.Err())
	}
	lead := r.lead
	sh.mu.Unlock()
	if lead {
		<-r.done // signalled as soon as handoff has released the lock
		return nil
	}
	return fmt.Errorf("redisstore: %w", ctx.Err())
}

// handoff ends g's call in flight: the pending batch, if any, is sent and
// its first request is told to lead it; otherwise g has no call in flight
// any more.
func (s *Store) handoff(sh *shard, g group) {
	sh.mu.Lock()
	next := sh.inflight[g]
	if next == nil || len(next.reqs) == 0 {
		delete(sh.inflight, g)
		sh.mu.Unlock()
		if next != nil {
			s.putBatch(next)
		}
		return
	}
	sh.inflight[g] = nil
	for _, r := range next.reqs {
		r.queued = false
	}
	leader := next.reqs[0]
	leader.lead = true
	sh.mu.Unlock()
	leader.done <- struct{}{}
}

// fly decides batch b, led by b.reqs[0] whose context is ctx: it asks the
// circuit (unless checked, with probe saying whether the call is the
// half-open probe), sends b, records in each request its decision or that
// Redis did not answer, hands g's next batch to its leader (if sh is not
// nil), wakes b's other requests and returns b to the pool. It returns an
// error only when the call was the leader's alone and ctx ended first.
//
// A batch of several requests is sent without ctx's cancellation (bounded
// by Options.Timeout): it is not the leader's call alone.
func (s *Store) fly(ctx context.Context, sc *script, g group, b *batch, sh *shard, checked, probe bool) error {
	ok, wait := true, int64(0)
	if !checked {
		ok, probe, wait = s.circuit.allow()
	}
	var err, ctxErr error
	if ok {
		callCtx := ctx
		if len(b.reqs) > 1 {
			callCtx = context.WithoutCancel(ctx)
		}
		start := s.clock.Nanotime()
		err = s.send(callCtx, sc, g, b)
		switch {
		case err == nil:
			s.circuit.success(probe)
		case ended(callCtx):
			s.circuit.abandon(probe)
			ctxErr = fmt.Errorf("redisstore: %w", cmp.Or(callCtx.Err(), context.DeadlineExceeded))
		default:
			s.circuit.failure(probe, start)
		}
	}
	if !ok || err != nil {
		for _, r := range b.reqs {
			r.answered, r.wait = false, wait
		}
	}
	if sh != nil {
		s.handoff(sh, g)
	}
	for _, r := range b.reqs[1:] {
		r.done <- struct{}{}
	}
	s.putBatch(b)
	if err != nil && ctxErr == nil && s.onError != nil {
		s.onError(err)
	}
	return ctxErr
}

// send makes the decisions of b's requests in Redis, in one script call,
// and records them in the requests.
//
// On the real clock the timeout is a context deadline (b's reusable
// deadlineCtx when ctx cannot be cancelled), which rueidis also sets on the
// connection: a call that is alone on its connection then writes and reads
// it directly, without handing the command to rueidis's writer and reader
// goroutines (a timeout there closes the connection, and rueidis dials a
// new one). On any other clock it is a timer on s.clock that cancels the
// call: the network client would read a deadline as wall time, which a fake
// clock's is not.
func (s *Store) send(parent context.Context, sc *script, g group, b *batch) error {
	ctx := parent
	switch {
	case s.realClock && parent.Done() == nil:
		ctx = b.ctx.arm(parent, s.timeout)
		defer b.ctx.disarm()
	case s.realClock:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.timeout, errTimeout)
		defer cancel()
	default:
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		timer := s.clock.AfterFunc(s.timeout, func() { cancel(errTimeout) })
		defer func() {
			timer.Stop()
			cancel(nil)
		}()
	}
	l := g.limit
	if b.limit != l || len(b.args) < 4 {
		b.args = append(b.args[:0],
			strconv.Itoa(l.Limit),
			strconv.FormatFloat(float64(l.Period)/float64(time.Microsecond), 'f', -1, 64),
			strconv.Itoa(l.Capacity()),
			"")
		b.limit = l
	}
	b.args = b.args[:4]
	b.args[3] = ""
	if sc.nonce {
		b.args[3] = s.nonce + "." + strconv.FormatUint(s.seq.Add(1), 36)
	}
	for _, r := range b.reqs {
		b.args = append(b.args, strconv.Itoa(r.n))
	}
	if b.key != g.key || b.sfx != sc.suffix {
		b.keys[0] = "{" + s.prefix + ":" + g.key + "}:" + sc.suffix
		b.key, b.sfx = g.key, sc.suffix
	}
	client := s.client
	if client == nil {
		var err error
		if client, err = s.conn.get(); err != nil {
			return fmt.Errorf("redisstore: %w", err)
		}
	}
	vals, err := sc.lua.Exec(ctx, client, b.keys[:], b.args).ToArray()
	if err != nil && (errors.Is(context.Cause(ctx), errTimeout) || errors.Is(err, context.DeadlineExceeded) && !ended(parent)) {
		err = errTimeout
	}
	if err != nil {
		return fmt.Errorf("redisstore: %s script: %w", sc.suffix, err)
	}
	if len(vals) != 4*len(b.reqs) {
		return fmt.Errorf("redisstore: %s script: reply has %d values, want %d", sc.suffix, len(vals), 4*len(b.reqs))
	}
	capacity := l.Capacity()
	for i, r := range b.reqs {
		var v [4]int64
		for j := range v {
			if v[j], err = vals[4*i+j].AsInt64(); err != nil {
				return fmt.Errorf("redisstore: %s script: reply value %d: %w", sc.suffix, 4*i+j, err)
			}
		}
		r.d = ratelimit.Decision{
			Allowed:    v[0] == 1,
			Limit:      capacity,
			Remaining:  int(max(0, v[1])),
			RetryAfter: time.Duration(v[2]) * time.Microsecond,
			ResetAfter: time.Duration(max(0, v[3])) * time.Microsecond,
		}
		if v[2] < 0 {
			r.d.RetryAfter = ratelimit.RetryNever
		}
		r.answered = true
	}
	return nil
}

// ended reports whether ctx is done or its deadline has passed (a deadline
// on the connection can be seen to pass before ctx's own timer fires).
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
