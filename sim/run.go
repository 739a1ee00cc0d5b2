package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// maxClasses is the most priority classes a scenario may have, as in
// concurrency.NumPriorities.
const maxClasses = 4

// Attempt states.
const (
	stIdle     uint8 = iota // rejected, a retry is scheduled
	stWaiting               // in the client queue
	stInflight              // admitted, no response yet
	stResolved              // the user request is over
)

// Event kinds.
const (
	evService  uint8 = iota // a worker finished a request
	evResponse              // a response reached the client
	evDeadline              // a request's deadline passed
	evExpire                // a queued attempt's MaxWait passed
	evRetry                 // a rejected request tries again
)

// request is one user request and its current attempt.
type request struct {
	born     int64 // first arrival, ns
	deadline int64 // absolute, ns
	work     int64 // time it occupies a worker, ns
	arrived  int64 // arrival of the current attempt
	start    int64 // admission of the current attempt
	gen      uint32
	inflight int32 // in flight at admission, itself included
	seg      int16 // segment of born; -1 before the warm-up
	class    uint8
	attempt  uint8
	state    uint8
	atServer bool // queued at or served by the downstream
}

type event struct {
	t       int64
	id      int32
	gen     uint32
	kind    uint8
	attempt uint8
}

// engine is one run. It is not safe for concurrent use.
type engine struct {
	sc        Scenario
	alg       Algorithm
	aware     OptimumAware
	now       int64
	end       int64 // arrivals stop
	stop      int64 // every request is resolved
	arrRng    *rand.Rand
	svcRng    *rand.Rand
	retryRng  *rand.Rand
	svcMean   float64 // ns
	lnMu      float64 // lognormal location
	fastMean  float64 // bimodal
	costCum   []float64
	classCum  []float64
	nclass    int
	baseRate  float64 // requests per ns at load 1
	rate      float64 // current mean rate, requests per ns
	burstOn   bool
	phaseEnd  int64
	next      int64 // next arrival
	workers   int
	busy      int
	netDelay  int64
	srvQ      ring[int32]
	inflight  int
	inflOf    [maxClasses]int
	cq        [maxClasses]ring[waiter] // may hold stale entries
	waitOf    [maxClasses]int          // live waiters per class
	waiting   int                      // live waiters
	reqs      []request
	free      []int32
	heap      evHeap
	due       ring[event] // deadlines, in time order
	stepIdx   int
	nextTick  int64
	tickIdx   int
	series    []int32
	optimum   float64
	segs      []segAcc
	segStarts []int64
}

// Run simulates sc with alg and returns its figures. It is deterministic:
// the same normalized scenario and a deterministic algorithm give identical
// results. Every algorithm run on the same scenario sees the same arrivals,
// service times, costs and classes.
func Run(sc Scenario, name string, alg Algorithm) (*Result, error) {
	sc, err := sc.Normalize()
	if err != nil {
		return nil, err
	}
	e := newEngine(sc, alg)
	e.loop()
	return e.result(name), nil
}

// RunFactory makes an algorithm with f and runs sc with it.
func RunFactory(sc Scenario, f Factory) (*Result, error) {
	sc, err := sc.Normalize()
	if err != nil {
		return nil, err
	}
	alg, err := f.New(sc)
	if err != nil {
		return nil, fmt.Errorf("sim: %s on %s: %w", f.Name, sc.Name, err)
	}
	return Run(sc, f.Name, alg)
}

func newEngine(sc Scenario, alg Algorithm) *engine {
	e := &engine{
		sc:       sc,
		alg:      alg,
		end:      int64(sc.Duration),
		stop:     int64(sc.Duration + sc.Deadline + 1),
		arrRng:   rand.New(rand.NewPCG(sc.Seed, 1)),
		svcRng:   rand.New(rand.NewPCG(sc.Seed, 2)),
		retryRng: rand.New(rand.NewPCG(sc.Seed, 3)),
		svcMean:  float64(sc.Service.Mean),
		workers:  sc.Workers,
		netDelay: int64(sc.NetDelay),
		nclass:   max(1, len(sc.Classes)),
		burstOn:  false,
	}
	e.aware, _ = alg.(OptimumAware)
	switch sc.Service.Kind {
	case Lognormal:
		e.lnMu = math.Log(e.svcMean) - sc.Service.Sigma*sc.Service.Sigma/2
	case Bimodal:
		p, k := sc.Service.SlowFraction, sc.Service.SlowFactor
		e.fastMean = e.svcMean / (1 - p + p*k)
	}
	e.costCum = cumulative(sc.Costs, func(c CostClass) float64 { return c.Weight })
	e.classCum = cumulative(sc.Classes, func(c Class) float64 { return c.Weight })
	if sc.Arrivals.Rate > 0 {
		e.baseRate = sc.Arrivals.Rate / 1e9 / sc.Arrivals.Load
	} else {
		e.baseRate = sc.Capacity(sc.Workers) / 1e9
	}
	e.rate = e.baseRate * sc.Arrivals.Load
	e.segStarts = []int64{0}
	for _, s := range sc.Steps {
		if t := int64(s.At); t != e.segStarts[len(e.segStarts)-1] {
			e.segStarts = append(e.segStarts, t)
		}
	}
	e.segs = make([]segAcc, len(e.segStarts))
	for i := range e.segs {
		e.segs[i].init()
	}
	e.series = make([]int32, int(sc.Duration/sc.Tick)+1)
	e.optimum = sc.Optimum(e.workers, sc.NetDelay)
	e.segs[0].optimum = e.optimum
	e.segs[0].load = sc.Arrivals.Load * e.baseRate / (sc.Capacity(e.workers) / 1e9)
	if e.aware != nil {
		e.aware.SetOptimum(Epoch, e.optimum)
	}
	if sc.Arrivals.Kind == Bursty {
		e.burstOn = true
		e.phaseEnd = e.phaseLen()
	}
	e.next = e.drawArrival(0)
	return e
}

// loop runs events in time order until every request is resolved.
// Deadlines come from a FIFO (every request's deadline is its arrival plus
// the same Deadline, so they are due in arrival order); the other events
// from a heap.
func (e *engine) loop() {
	for {
		t, what := e.stop, -1
		if len(e.heap) > 0 && e.heap[0].t < t {
			t, what = e.heap[0].t, 0
		}
		if e.due.len() > 0 && e.due.peek().t < t {
			t, what = e.due.peek().t, 3
		}
		if e.next < t && e.next < e.end {
			t, what = e.next, 1
		}
		if e.stepIdx < len(e.sc.Steps) && int64(e.sc.Steps[e.stepIdx].At) <= t {
			t, what = int64(e.sc.Steps[e.stepIdx].At), 2
		}
		e.ticks(t)
		if what < 0 {
			return
		}
		e.now = t
		switch what {
		case 0:
			e.event(e.heap.pop())
		case 1:
			e.next = e.drawArrival(t)
			e.arrive()
		case 2:
			e.step(e.sc.Steps[e.stepIdx])
			e.stepIdx++
		case 3:
			e.event(e.due.pop())
		}
	}
}

// ticks records the current limit at every tick before t.
func (e *engine) ticks(t int64) {
	for e.tickIdx < len(e.series) && e.nextTick < t {
		e.series[e.tickIdx] = int32(min(e.alg.Limit(), Unlimited))
		e.tickIdx++
		e.nextTick += int64(e.sc.Tick)
	}
}

// step applies a step of the scenario.
func (e *engine) step(s Step) {
	if s.Workers > 0 {
		e.workers = s.Workers
		e.startWork()
	}
	e.netDelay = max(0, e.netDelay+int64(s.AddNetDelay))
	if s.Load > 0 {
		e.rate = e.baseRate * s.Load
		e.next = e.drawArrival(e.now)
	}
	e.optimum = e.sc.Optimum(e.workers, time.Duration(e.netDelay))
	if e.aware != nil {
		e.aware.SetOptimum(Epoch+e.now, e.optimum)
	}
	if i := e.segOf(e.now); e.segStarts[i] == e.now {
		e.segs[i].optimum = e.optimum
		e.segs[i].load = e.rate / (e.sc.Capacity(e.workers) / 1e9)
	}
}

// segOf returns the segment that contains t.
func (e *engine) segOf(t int64) int {
	i := len(e.segStarts) - 1
	for i > 0 && e.segStarts[i] > t {
		i--
	}
	return i
}

// arrive creates a user request at e.now and makes its first attempt.
func (e *engine) arrive() {
	id := e.alloc()
	r := &e.reqs[id]
	r.born = e.now
	r.deadline = e.now + int64(e.sc.Deadline)
	r.attempt, r.state, r.atServer = 0, stIdle, false
	r.class = 0
	if e.classCum != nil {
		r.class = uint8(pick(e.classCum, e.svcRng.Float64()))
	}
	r.work = e.drawWork()
	e.due.push(event{t: r.deadline + 1, id: id, gen: r.gen, kind: evDeadline})
	r.seg = -1
	if e.now >= int64(e.sc.Warmup) {
		r.seg = int16(e.segOf(e.now))
		s := &e.segs[r.seg]
		s.users++
		s.classUsers[r.class]++
		s.ideal.add(r.work + e.netDelay)
	}
	e.try(id)
}

func (e *engine) alloc() int32 {
	if n := len(e.free); n > 0 {
		id := e.free[n-1]
		e.free = e.free[:n-1]
		return id
	}
	e.reqs = append(e.reqs, request{})
	return int32(len(e.reqs) - 1)
}

// release frees a request's slot once it is resolved and off the downstream.
func (e *engine) release(id int32) {
	r := &e.reqs[id]
	if r.state != stResolved || r.atServer {
		return
	}
	r.gen++
	e.free = append(e.free, id)
}

func (e *engine) push(kind uint8, t int64, id int32) {
	r := &e.reqs[id]
	e.heap.push(event{t: t, id: id, gen: r.gen, kind: kind, attempt: r.attempt})
}

// try makes an attempt of request id at e.now.
func (e *engine) try(id int32) {
	r := &e.reqs[id]
	r.arrived = e.now
	if r.seg >= 0 {
		e.segs[r.seg].attempts++
	}
	if e.waiting == 0 && e.admits(int(r.class)) {
		e.admit(id)
		return
	}
	if e.sc.Queue.Max > 0 && e.waiting < e.sc.Queue.Max {
		r.state = stWaiting
		e.cq[r.class].push(waiter{id: id, gen: r.gen, attempt: r.attempt})
		e.waiting++
		e.waitOf[r.class]++
		if w := e.sc.Queue.MaxWait; w > 0 && e.now+int64(w) < r.deadline {
			e.push(evExpire, e.now+int64(w), id)
		}
		e.dispatch()
		return
	}
	e.reject(id)
}

// admits reports whether an attempt of class c may start: fewer than the
// limit in flight and, with priority classes, the rule of
// concurrency.Limiter (within its guaranteed share, or leaving enough free
// slots for the unused shares of the other active classes).
func (e *engine) admits(c int) bool {
	lim := e.alg.Limit()
	if e.inflight >= lim {
		return false
	}
	if e.nclass == 1 {
		return true
	}
	g := func(q int) int { return int(e.sc.Classes[q].Share*float64(lim) + 1e-9) }
	if e.inflOf[c] < g(c) {
		return true
	}
	reserve := 0
	for q := range e.nclass {
		if q == c || (e.inflOf[q] == 0 && e.waitOf[q] == 0) {
			continue
		}
		if gq := g(q); gq > e.inflOf[q] {
			reserve += gq - e.inflOf[q]
		}
	}
	return lim-e.inflight-1 >= reserve
}

// admit sends the current attempt of request id to the downstream.
func (e *engine) admit(id int32) {
	r := &e.reqs[id]
	e.inflight++
	e.inflOf[r.class]++
	r.state = stInflight
	r.start = e.now
	r.inflight = int32(e.inflight)
	r.atServer = true
	if e.busy < e.workers {
		e.busy++
		e.push(evService, e.now+r.work, id)
	} else {
		e.srvQ.push(id)
	}
}

// dispatch admits queued attempts while they may start, the most important
// class first and FIFO within a class, skipping attempts no longer waiting.
func (e *engine) dispatch() {
	for e.waiting > 0 {
		moved := false
		for c := range e.nclass {
			q := &e.cq[c]
			for q.len() > 0 && !e.live(q.peek()) {
				q.pop()
			}
			if q.len() > 0 && e.admits(c) {
				w := q.pop()
				e.unwait(w.id)
				e.admit(w.id)
				moved = true
				break
			}
		}
		if !moved {
			return
		}
	}
}

// startWork starts queued requests on free workers.
func (e *engine) startWork() {
	for e.busy < e.workers && e.srvQ.len() > 0 {
		id := e.srvQ.pop()
		r := &e.reqs[id]
		if e.sc.SkipExpired && r.state == stResolved {
			r.atServer = false
			e.release(id)
			continue
		}
		e.busy++
		e.push(evService, e.now+r.work, id)
	}
}

// reject rejects the current attempt of request id; the client retries if
// it may.
func (e *engine) reject(id int32) {
	r := &e.reqs[id]
	if r.seg >= 0 {
		e.segs[r.seg].attemptRejects++
	}
	if int(r.attempt) < e.sc.Retry.MaxRetries {
		b := int64((0.5 + e.retryRng.Float64()) * float64(e.sc.Retry.Backoff))
		if e.now+b < r.deadline {
			r.state = stIdle
			r.attempt++
			e.push(evRetry, e.now+b, id)
			return
		}
	}
	r.state = stResolved
	e.release(id)
}

// event handles one scheduled event, ignoring stale ones.
func (e *engine) event(ev event) {
	r := &e.reqs[ev.id]
	if ev.gen != r.gen {
		return
	}
	switch ev.kind {
	case evService:
		e.busy--
		r.atServer = false
		if r.state == stInflight {
			if e.netDelay == 0 {
				e.finish(ev.id, false)
			} else {
				e.push(evResponse, e.now+e.netDelay, ev.id)
			}
		} else {
			e.release(ev.id)
		}
		e.startWork()
	case evResponse:
		if r.state == stInflight {
			e.finish(ev.id, false)
		}
	case evDeadline:
		switch r.state {
		case stInflight:
			e.finish(ev.id, true)
		case stWaiting:
			e.unwait(ev.id)
			r.state = stResolved
			if r.seg >= 0 {
				e.segs[r.seg].timeouts++
			}
			e.release(ev.id)
		}
	case evExpire:
		if r.state == stWaiting && r.attempt == ev.attempt {
			e.unwait(ev.id)
			r.state = stIdle
			e.reject(ev.id)
		}
	case evRetry:
		if r.state == stIdle && r.attempt == ev.attempt {
			e.try(ev.id)
		}
	}
}

// finish ends the admitted attempt of request id: a response, or a timeout
// (dropped) at its deadline. It feeds the algorithm and admits waiters.
func (e *engine) finish(id int32, dropped bool) {
	r := &e.reqs[id]
	e.inflight--
	e.inflOf[r.class]--
	r.state = stResolved
	e.alg.Sample(Epoch+e.now, time.Duration(e.now-r.start), int(r.inflight), dropped)
	if r.seg >= 0 {
		s := &e.segs[r.seg]
		lat := e.now - r.arrived
		if dropped {
			lat = r.deadline - r.arrived
			s.timeouts++
		} else {
			s.good++
			s.classGood[r.class]++
		}
		s.lat.add(lat)
	}
	e.release(id)
	if e.waiting > 0 {
		e.dispatch()
	}
}
