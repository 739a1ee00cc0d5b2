//go:build !linux

package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// loopsSupported reports whether this system has the event-loop engine.
const loopsSupported = false

// loopEngine is the event-loop engine, which needs Linux.
type loopEngine struct {
	handovers atomic.Uint64
	conns     atomic.Int64
	handoff   *handoffListener
}

func newLoopEngine(*Gateway, net.Addr) (*loopEngine, error) { return nil, errors.ErrUnsupported }

func (*loopEngine) start() error                   { return errors.ErrUnsupported }
func (*loopEngine) serve(net.Listener) error       { return errors.ErrUnsupported }
func (*loopEngine) shutdown(context.Context) error { return nil }

func (*loopEngine) serveTLS(*sockSwitch, *tls.Conn) bool { return false }

// idleOnLoop is a connection idle on a loop: there are none.
type idleOnLoop struct{ deadline time.Time }

func (*loopEngine) idleConns() []idleOnLoop { return nil }
func (*loopEngine) mark([]idleOnLoop)       {}
