package gateway

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/breaker"
)

// Transition is one state change of a circuit breaker.
type Transition struct {
	At   time.Time `json:"at"`
	From string    `json:"from"`
	To   string    `json:"to"`
}

// Bounds of a transitions log.
const (
	// maxTransitions is how many of its last state changes a breaker keeps.
	maxTransitions = 5
	// maxTransitionBreakers is how many breakers a log holds: reloads can
	// name new routes without end, so the breaker whose last change is the
	// oldest makes room for a new one.
	maxTransitionBreakers = 1024
)

// transitions is a log of the last state changes of breakers, by a key
// of type K, which the dashboard shows: the routes' breakers by route name,
// the targets' passive-health breakers by targetKey. The breakers record
// their changes from their OnStateChange callbacks. The zero value is an
// empty log, safe for concurrent use.
type transitions[K comparable] struct {
	mu     sync.Mutex         // protects byName
	byName map[K][]Transition // oldest first, at most maxTransitions each
}

// targetKey names a target's breaker in a transitions log: its upstream's
// name and its URL.
type targetKey struct{ upstream, url string }

// record logs a change of breaker name from one state to another at at.
func (t *transitions[K]) record(name K, from, to breaker.State, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(name, Transition{At: at, From: from.String(), To: to.String()})
}

// recordTo logs a change of breaker name to state to at at, from the state
// its last logged change went to (closed, a breaker's first state, when
// none was logged).
func (t *transitions[K]) recordTo(name K, to breaker.State, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := breaker.Closed.String()
	if log := t.byName[name]; len(log) > 0 {
		from = log[len(log)-1].To
	}
	t.add(name, Transition{At: at, From: from, To: to.String()})
}

// add appends tr to the log of breaker name. It requires that t.mu is
// held.
func (t *transitions[K]) add(name K, tr Transition) {
	if t.byName == nil {
		t.byName = map[K][]Transition{}
	}
	log, known := t.byName[name]
	if !known && len(t.byName) >= maxTransitionBreakers {
		t.evictOldest()
	}
	if len(log) == maxTransitions {
		log = append(log[:0], log[1:]...)
	}
	t.byName[name] = append(log, tr)
}

// evictOldest forgets the breaker whose last change is the oldest. It
// requires that t.mu is held.
func (t *transitions[K]) evictOldest() {
	var oldest K
	var at time.Time
	first := true
	for name, log := range t.byName {
		if last := log[len(log)-1].At; first || last.Before(at) {
			oldest, at, first = name, last, false
		}
	}
	delete(t.byName, oldest)
}

// forget drops the log of breaker name: its route or target is gone.
func (t *transitions[K]) forget(name K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byName, name)
}

// last returns a copy of the last changes of breaker name, oldest first;
// nil when it has none.
func (t *transitions[K]) last(name K) []Transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := t.byName[name]
	if log == nil {
		return nil
	}
	return append([]Transition(nil), log...)
}
