package gateway

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/breaker"
)

// TestTransitionsBounded: a breaker keeps its last maxTransitions changes,
// oldest first, and a full log forgets the breaker whose last change is
// the oldest to make room for a new one.
func TestTransitionsBounded(t *testing.T) {
	var log transitions[string]
	at := time.Unix(0, 0)
	states := []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen}
	for i := range maxTransitions + 2 {
		log.record("r", states[i%3], states[(i+1)%3], at.Add(time.Duration(i)*time.Second))
	}
	got := log.last("r")
	if len(got) != maxTransitions || !got[0].At.Equal(at.Add(2*time.Second)) || got[0].From != "half-open" ||
		!got[maxTransitions-1].At.Equal(at.Add(time.Duration(maxTransitions+1)*time.Second)) {
		t.Fatalf("last changes %+v", got)
	}
	got[0].To = "changed by the caller"
	if log.last("r")[0].To == got[0].To {
		t.Error("last returned the log itself, not a copy")
	}
	if log.last("unknown") != nil {
		t.Error("a breaker without changes has some")
	}

	// "r" changed last at 6s; the others at 10s and later.
	for i := 1; i < maxTransitionBreakers; i++ {
		log.record("b"+strconv.Itoa(i), breaker.Closed, breaker.Open, at.Add(time.Duration(9+i)*time.Second))
	}
	log.record("new", breaker.Closed, breaker.Open, at.Add(time.Hour))
	if log.last("r") != nil || log.last("new") == nil || log.last("b1") == nil || len(log.byName) != maxTransitionBreakers {
		t.Errorf("after a full log took a new breaker: r %v, new %v, b1 %v, %d breakers",
			log.last("r"), log.last("new"), log.last("b1"), len(log.byName))
	}
}

// TestTransitionsRecordTo: a change known by its new state alone comes
// from the state the last one went to, closed for the first; a forgotten
// breaker has none.
func TestTransitionsRecordTo(t *testing.T) {
	var log transitions[targetKey]
	k, other := targetKey{"up", "http://a"}, targetKey{"other", "http://a"}
	at := time.Unix(0, 0)
	log.recordTo(k, breaker.Open, at)
	log.recordTo(k, breaker.HalfOpen, at.Add(5*time.Second))
	log.recordTo(other, breaker.Open, at)
	got := log.last(k)
	if len(got) != 2 || got[0].From != "closed" || got[0].To != "open" || got[1].From != "open" || got[1].To != "half-open" {
		t.Fatalf("changes %+v, want closed → open → half-open", got)
	}
	log.forget(k)
	if log.last(k) != nil || log.last(other) == nil {
		t.Errorf("after forgetting %v: its changes %+v, the other's %+v", k, log.last(k), log.last(other))
	}
}
