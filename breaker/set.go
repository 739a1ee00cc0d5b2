package breaker

import "sync"

// Set is a keyed set of breakers sharing one configuration: Get creates the
// breaker of a name the first time it is asked for, so that each downstream
// method or host trips on its own failures and not on its neighbours'.
// Names should come from a bounded set (methods, routes, hosts, not user
// input): a Set never forgets a breaker. It is safe for concurrent use.
type Set struct {
	cfg config
	m   sync.Map // name → *Breaker
}

// NewSet returns an empty Set whose breakers are configured by opts, each
// named by its key (opts.Name is ignored). It returns the errors New would.
func NewSet(opts Options) (*Set, error) {
	cfg, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return &Set{cfg: cfg}, nil
}

// Get returns the breaker named name, creating it, closed, on first use.
// Getting an existing breaker takes no lock and allocates nothing.
func (s *Set) Get(name string) *Breaker {
	if b, ok := s.m.Load(name); ok {
		return b.(*Breaker)
	}
	cfg := s.cfg
	cfg.name = name
	b, _ := s.m.LoadOrStore(name, newBreaker(cfg))
	return b.(*Breaker)
}

// Range calls f for each breaker of the set, in no particular order, until f
// returns false. Breakers created during Range may or may not be seen.
func (s *Set) Range(f func(name string, b *Breaker) bool) {
	s.m.Range(func(k, v any) bool { return f(k.(string), v.(*Breaker)) })
}
