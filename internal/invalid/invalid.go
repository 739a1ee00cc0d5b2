// Package invalid makes the errors that sluice's constructors return for
// unusable options: one error per unusable option, each naming it and
// matching sluice.ErrInvalidOptions (errors.Is), joined with errors.Join.
package invalid

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

// Sentinel returns an error whose message is msg and which matches
// sluice.ErrInvalidOptions: a package's own sentinel, such as
// breaker.ErrInvalidOptions.
func Sentinel(msg string) error { return &sentinel{msg: msg} }

type sentinel struct{ msg string }

func (s *sentinel) Error() string { return s.msg }

// Is reports whether target is sluice.ErrInvalidOptions.
func (s *sentinel) Is(target error) bool { return target == sluice.ErrInvalidOptions }

// Problems collects the unusable options of one constructor call. The zero
// value is usable; set Prefix and Sentinel before the first Addf.
type Problems struct {
	// Prefix starts the message of every problem, as "Prefix: problem".
	Prefix string
	// Sentinel is what every problem wraps: a package's sentinel made by
	// Sentinel. Nil means sluice.ErrInvalidOptions itself.
	Sentinel error

	errs []error
}

// Addf records one problem, described by format and args, which should
// name the option (for example "Window %d is negative").
func (p *Problems) Addf(format string, args ...any) {
	s := p.Sentinel
	if s == nil {
		s = sluice.ErrInvalidOptions
	}
	p.errs = append(p.errs, &problem{msg: p.Prefix + ": " + fmt.Sprintf(format, args...), sentinel: s})
}

// Add records err, the problems found by another check (another Problems'
// Err), if it is not nil.
func (p *Problems) Add(err error) {
	if err != nil {
		p.errs = append(p.errs, err)
	}
}

// Err returns the problems joined by errors.Join, or nil if there are none.
func (p *Problems) Err() error { return errors.Join(p.errs...) }

// problem is one unusable option: its message stands alone, and it wraps
// its package's sentinel.
type problem struct {
	msg      string
	sentinel error
}

func (e *problem) Error() string { return e.msg }

func (e *problem) Unwrap() error { return e.sentinel }
