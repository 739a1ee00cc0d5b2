package gateway

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/config"
)

// priorities gives each request of a route its priority class, for the
// route's adaptive limit (see config.Priority). A nil *priorities gives
// every request context.Background().
type priorities struct {
	header string                          // the header read; "" when the class is the route's
	values map[string]concurrency.Priority // header value → class
	def    concurrency.Priority
	// ctxs[p] carries priority p; made once, so that giving a request its
	// class allocates nothing.
	ctxs [concurrency.NumPriorities]context.Context
}

func newPriorities(pc *config.Priority) *priorities {
	if pc == nil {
		return nil
	}
	p := &priorities{def: classNamed(pc.Default), values: map[string]concurrency.Priority{}}
	p.header = pc.From.Header // "" unless the class is read from a header
	for v, c := range pc.Values {
		p.values[v] = classNamed(c)
	}
	for c := range p.ctxs {
		p.ctxs[c] = concurrency.WithPriority(context.Background(), concurrency.Priority(c))
	}
	return p
}

// of returns a context that carries req's class.
func (p *priorities) of(req request) context.Context {
	if p == nil {
		return context.Background()
	}
	return p.ctxs[p.class(req)]
}

// maxPriorityValues bounds the values of a priority header read: a
// request with more is best effort.
const maxPriorityValues = 8

// class returns req's class: the one its header's value maps to, else the
// default. A header sent more than once gives the least important class
// of its values (an unmapped one counting as the default), so that a
// client that adds its own before a proxy's cannot raise its class.
func (p *priorities) class(req request) concurrency.Priority {
	if p.header == "" {
		return p.def
	}
	class := concurrency.Critical
	for i := range maxPriorityValues + 1 {
		v := req.PeekAt(p.header, i)
		switch {
		case v == nil && i == 0:
			return p.def
		case v == nil:
			return class
		case i == maxPriorityValues:
			return concurrency.BestEffort
		}
		c, ok := p.values[string(v)] // no allocation: a map index by string(bytes)
		if !ok {
			c = p.def
		}
		class = max(class, c)
	}
	return class
}

// classNamed returns the class config.PriorityClasses names name; the
// configuration was validated.
func classNamed(name string) concurrency.Priority {
	return concurrency.Priority(max(slices.Index(config.PriorityClasses, name), 0))
}

// shares returns the limiter shares of a route's priority classes, nil
// without classes.
func shares(pc *config.Priority) []concurrency.Share {
	if pc == nil {
		return nil
	}
	s := pc.Shares
	return []concurrency.Share{{Fraction: s.Critical}, {Fraction: s.Normal}, {Fraction: s.BestEffort}}
}
