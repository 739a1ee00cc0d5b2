package limit

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"
)

// model is a tiny discrete-event downstream in virtual time for tests: Poisson
// arrivals at load × capacity, admitted while fewer than the algorithm's
// limit are in flight, a path delay, then a FIFO queue in front of workers
// with exponential service times. It is deliberately small; the simulator
// of record lives in sim/.
type model struct {
	workers  func(t time.Duration) int           // workers at t
	path     func(t time.Duration) time.Duration // extra latency of a call started at t
	service  time.Duration                       // mean service time
	load     float64                             // arrival rate ÷ capacity at t=0
	deadline time.Duration                       // a call that takes longer drops
	seed     uint64
	tick     func(t time.Duration) // if not nil, called every service time
}

// modelStats is what a model run observed after its warm-up.
type modelStats struct {
	arrived, rejected, good int
	limits                  []int // the limit, sampled every service time
}

type modelEvent struct {
	at    time.Duration
	kind  int // 0 arrival, 1 reaches the worker queue, 2 service done, 3 back at the client
	start time.Duration
	infl  int
	delay time.Duration
}

type modelHeap []modelEvent

func (h modelHeap) Len() int           { return len(h) }
func (h modelHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h modelHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *modelHeap) Push(x any)        { *h = append(*h, x.(modelEvent)) }
func (h *modelHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// run drives alg from time 0 to end and returns what happened from `from`.
func (m model) run(alg Algorithm, from, end time.Duration) modelStats {
	rng := rand.New(rand.NewPCG(m.seed, 1))
	rate := m.load * float64(m.workers(0)) / m.service.Seconds()
	exp := func(mean float64) time.Duration { return time.Duration(rng.ExpFloat64() * mean) }
	var (
		h        = &modelHeap{{at: exp(1e9 / rate)}}
		st       modelStats
		inflight int
		busy     int
		queue    []modelEvent
		nextTick time.Duration
	)
	serve := func(e modelEvent) {
		busy++
		e.kind, e.at = 2, e.at+exp(float64(m.service))
		heap.Push(h, e)
	}
	for h.Len() > 0 {
		e := heap.Pop(h).(modelEvent)
		if e.at > end {
			break
		}
		for ; nextTick <= e.at; nextTick += m.service {
			if nextTick >= from {
				st.limits = append(st.limits, alg.Limit())
			}
			if m.tick != nil {
				m.tick(nextTick)
			}
		}
		counted := e.at >= from
		switch e.kind {
		case 0:
			heap.Push(h, modelEvent{at: e.at + exp(1e9/rate)})
			if counted {
				st.arrived++
			}
			if inflight >= alg.Limit() {
				if counted {
					st.rejected++
				}
				continue
			}
			inflight++
			d := m.path(e.at)
			heap.Push(h, modelEvent{at: e.at + d/2, kind: 1, start: e.at, infl: inflight, delay: d})
		case 1:
			if busy < m.workers(e.at) {
				serve(e)
			} else {
				queue = append(queue, e)
			}
		case 2:
			busy--
			for len(queue) > 0 && busy < m.workers(e.at) {
				q := queue[0]
				queue = queue[1:]
				q.at = e.at
				serve(q)
			}
			e.kind, e.at = 3, e.at+e.delay/2
			heap.Push(h, e)
		case 3:
			inflight--
			rtt := e.at - e.start
			dropped := rtt > m.deadline
			if counted && !dropped {
				st.good++
			}
			alg.Sample(int64(e.at), rtt, e.infl, dropped)
		}
	}
	return st
}

// meanLimit returns the mean of limits.
func meanLimit(limits []int) float64 {
	s := 0
	for _, l := range limits {
		s += l
	}
	return float64(s) / float64(len(limits))
}

// constWorkers and noPath are the model's defaults.
func constWorkers(n int) func(time.Duration) int { return func(time.Duration) int { return n } }
func noPath(time.Duration) time.Duration         { return 0 }

// sqrt is math.Sqrt, kept local to the tests' helpers.
func sqrt(x float64) float64 { return math.Sqrt(x) }
