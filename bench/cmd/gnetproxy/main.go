// Command gnetproxy is a measuring tool, not a proxy: the least an
// event-loop HTTP/1.1 proxy in Go (on gnet, nginx's architecture: one event
// loop per core, each client connection paired with an upstream connection
// on the same loop) can do. It forwards requests without bodies as they are
// and responses framed by Content-Length, and parses nothing else.
// scripts/loadtest.sh measures it beside sluice to show how far a Go engine
// of nginx's design gets on the machine, before any HTTP handling or policy.
//
//	gnetproxy LISTEN UPSTREAM_HOST:PORT
package main

import (
	"bytes"
	"context"
	"log"
	"net"
	"os"
	"strconv"

	"github.com/panjf2000/gnet/v2"
)

// pair is a client connection and its upstream connection.
type pair struct {
	client, up gnet.Conn
	pending    []byte // requests waiting for the upstream connection
	closed     bool   // the client is gone
}

// proxy handles both sides' events: a connection whose context is a pair
// it does not belong to as client is that pair's upstream side.
type proxy struct {
	gnet.BuiltinEventEngine
	up *net.TCPAddr
}

func (p *proxy) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if pr, ok := c.Context().(*pair); ok && pr.up == nil && pr.client != c { // the upstream side
		pr.up = c
		if len(pr.pending) > 0 {
			c.Write(pr.pending)
			pr.pending = pr.pending[:0]
		}
		return nil, gnet.None
	}
	pr := &pair{client: c}
	c.SetContext(pr)
	if err := p.connect(c, pr); err != nil {
		log.Println(err)
		return nil, gnet.Close
	}
	return nil, gnet.None
}

// connect opens pr's upstream connection on c's event loop.
func (p *proxy) connect(c gnet.Conn, pr *pair) error {
	_, err := c.EventLoop().Register(gnet.NewContext(context.Background(), pr), p.up)
	return err
}

var crlf2 = []byte("\r\n\r\n")
var clKey = []byte("\r\ncontent-length:")

func (p *proxy) OnTraffic(c gnet.Conn) gnet.Action {
	pr := c.Context().(*pair)
	buf, _ := c.Peek(-1)
	if c == pr.client {
		used := 0
		for {
			i := bytes.Index(buf[used:], crlf2)
			if i < 0 {
				break
			}
			req := buf[used : used+i+4]
			if pr.up != nil {
				pr.up.Write(req)
			} else {
				pr.pending = append(pr.pending, req...)
			}
			used += i + 4
		}
		c.Discard(used)
		return gnet.None
	}
	used := 0
	for {
		rest := buf[used:]
		i := bytes.Index(rest, crlf2)
		if i < 0 {
			break
		}
		n := i + 4
		j := bytes.Index(bytes.ToLower(rest[:i+2]), clKey)
		if j >= 0 {
			v := rest[j+len(clKey):]
			v = v[:bytes.IndexByte(v, '\r')]
			cl, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			n += cl
		}
		if len(rest) < n {
			break
		}
		pr.client.Write(rest[:n])
		used += n
	}
	c.Discard(used)
	return gnet.None
}

func (p *proxy) OnClose(c gnet.Conn, err error) gnet.Action {
	pr, ok := c.Context().(*pair)
	switch {
	case !ok:
	case c == pr.client:
		pr.closed = true
		if pr.up != nil {
			pr.up.Close()
		}
	case c == pr.up && !pr.closed:
		// The upstream ended a keep-alive connection (nginx does after
		// keepalive_requests): open another for the next requests.
		pr.up = nil
		if err := p.connect(pr.client, pr); err != nil {
			log.Println(err)
			return gnet.None
		}
	}
	return gnet.None
}

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: gnetproxy LISTEN UPSTREAM_HOST:PORT (for example 127.0.0.1:8081 127.0.0.1:8000)")
	}
	up, err := net.ResolveTCPAddr("tcp", os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(gnet.Run(&proxy{up: up}, "tcp://"+os.Args[1], gnet.WithMulticore(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay)))
}
