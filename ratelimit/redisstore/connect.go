package redisstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// unreachable reports whether err, from rueidis.NewClient, says that Redis
// could not be reached (a refused, reset or timed-out connection), as
// opposed to a configuration that can never work (a wrong password, an
// option rueidis refuses).
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// connector makes the client of a Store that DialClient returned before
// Redis could be reached. Until it has one, each call to Redis fails at
// once, without touching the network, and is decided as Options.OnError
// says, like a call to a Redis that is down, and the circuit opens as for
// one. A call that finds no client and no attempt under way starts one, in
// the background: with the circuit open, that is at most one attempt per
// Options.OpenDuration, started by its probe.
type connector struct {
	co      rueidis.ClientOption
	client  atomic.Pointer[clientRef] // nil until an attempt succeeds
	dialing atomic.Bool               // an attempt is under way

	mu      sync.Mutex // protects lastErr and closed
	lastErr error      // why the last attempt failed
	closed  bool       // Close was called: a client made later is closed at once
}

// clientRef holds a client for an atomic.Pointer.
type clientRef struct{ rueidis.Client }

// get returns the client, or an error saying why there is none after
// starting an attempt if none is under way.
func (c *connector) get() (rueidis.Client, error) {
	if ref := c.client.Load(); ref != nil {
		return ref.Client, nil
	}
	if c.dialing.CompareAndSwap(false, true) {
		go c.dial()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return nil, fmt.Errorf("not connected to Redis: %w", c.lastErr)
}

// dial makes one attempt; dialing is set.
func (c *connector) dial() {
	defer c.dialing.Store(false)
	client, err := rueidis.NewClient(c.co)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.lastErr = err
	case c.closed:
		client.Close()
	default:
		c.client.Store(&clientRef{client})
	}
}

// close closes the client, if there is one, and any made later.
func (c *connector) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if ref := c.client.Load(); ref != nil {
		ref.Client.Close()
	}
}
