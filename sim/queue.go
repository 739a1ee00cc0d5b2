package sim

// waiter is an entry of the client queue; it is stale once the request
// left the queue (its state, slot generation or attempt differ).
type waiter struct {
	id      int32
	gen     uint32
	attempt uint8
}

// live reports whether w still waits.
func (e *engine) live(w waiter) bool {
	r := &e.reqs[w.id]
	return r.gen == w.gen && r.attempt == w.attempt && r.state == stWaiting
}

// unwait counts request id out of the client queue.
func (e *engine) unwait(id int32) {
	e.waiting--
	e.waitOf[e.reqs[id].class]--
}

// ring is a FIFO queue.
type ring[T any] struct {
	buf        []T
	head, size int
}

func (q *ring[T]) len() int { return q.size }
func (q *ring[T]) peek() T  { return q.buf[q.head] }
func (q *ring[T]) push(x T) {
	if q.size == len(q.buf) {
		nb := make([]T, max(16, 2*len(q.buf)))
		for i := range q.size {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = x
	q.size++
}
func (q *ring[T]) pop() T {
	x := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return x
}

// evHeap is a binary min-heap of events by time.
type evHeap []event

func (h *evHeap) push(ev event) {
	*h = append(*h, ev)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].t <= a[i].t {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *evHeap) pop() event {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a[r].t < a[l].t {
			m = r
		}
		if a[i].t <= a[m].t {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
