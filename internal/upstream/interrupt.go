package upstream

import (
	"net"
	"sync"
	"time"
)

// aLongTimeAgo is a deadline that has passed: setting it ends the I/O in
// progress.
var aLongTimeAgo = time.Unix(1, 0)

// Interrupt cuts an exchange with a target short when its client leaves:
// Fire gives the connection in use a deadline that has passed, and the
// exchange then fails with the error Fire was given. The zero value is
// ready; a nil *Interrupt never fires. It is safe for concurrent use.
type Interrupt struct {
	mu   sync.Mutex    // protects conn, err and gone
	conn net.Conn      // the target connection in use; nil between exchanges
	err  error         // why the exchange was cut; nil until then
	gone chan struct{} // closed once cut; made by the first call to Left
}

// set makes c the connection in use, or returns the cut's error when the
// exchange was cut already.
func (i *Interrupt) set(c net.Conn) error {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.err != nil {
		return i.err
	}
	i.conn = c
	return nil
}

// clear ends the use of the connection: it returns err, or the cut's
// error when the exchange was cut (whatever err is: the connection then
// has a deadline that has passed, and must be closed).
func (i *Interrupt) clear(err error) error {
	if i == nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.conn = nil
	if i.err != nil {
		return i.err
	}
	return err
}

// Left returns a channel closed once the exchange is cut (never, for a nil
// *Interrupt): a wait between attempts ends on it.
func (i *Interrupt) Left() <-chan struct{} {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.gone == nil {
		i.gone = make(chan struct{})
		if i.err != nil {
			close(i.gone)
		}
	}
	return i.gone
}

// Fire cuts the exchange with err: the exchange under way fails with it,
// and so does every later one. Only the first call's err counts.
func (i *Interrupt) Fire(err error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.err == nil {
		i.err = err
		if i.gone != nil {
			close(i.gone)
		}
	}
	if i.conn != nil {
		_ = i.conn.SetDeadline(aLongTimeAgo)
	}
}
