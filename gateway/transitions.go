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

// transitions is the log of the last state changes of the routes'
// breakers, by breaker name (the route's), which the dashboard shows. The
// breakers record their changes from their OnStateChange callbacks. The zero value is an empty log, safe
// for concurrent use.
type transitions struct {
	mu     sync.Mutex              // protects byName
	byName map[string][]Transition // oldest first, at most maxTransitions each
}

// record logs a change of breaker name from one state to another at at.
func (t *transitions) record(name string, from, to breaker.State, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byName == nil {
		t.byName = map[string][]Transition{}
	}
	log, known := t.byName[name]
	if !known && len(t.byName) >= maxTransitionBreakers {
		t.evictOldest()
	}
	if len(log) == maxTransitions {
		log = append(log[:0], log[1:]...)
	}
	t.byName[name] = append(log, Transition{At: at, From: from.String(), To: to.String()})
}

// evictOldest forgets the breaker whose last change is the oldest. It
// requires that t.mu is held.
func (t *transitions) evictOldest() {
	var oldest string
	var at time.Time
	for name, log := range t.byName {
		if last := log[len(log)-1].At; oldest == "" || last.Before(at) {
			oldest, at = name, last
		}
	}
	delete(t.byName, oldest)
}

// last returns a copy of the last changes of breaker name, oldest first;
// nil when it has none.
func (t *transitions) last(name string) []Transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := t.byName[name]
	if log == nil {
		return nil
	}
	return append([]Transition(nil), log...)
}
