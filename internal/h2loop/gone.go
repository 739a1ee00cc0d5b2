package h2loop

// gone remembers the streams the server ended while their requests were
// still arriving (an answer before the body's end, a reset, a stream
// refused at its HEADERS, or dropped as it came after GOAWAY), with the
// bytes each stream's window still let the client send: the DATA frames
// and trailers the client sent before it learnt of the end are ignored
// within them (RFC 9113 sections 5.1 and 6.8), rather than each answered
// with RST_STREAM and counted as a control frame. It remembers the last
// MaxConcurrentStreams such streams.
type gone struct {
	left map[uint32]int64 // stream id → the window's bytes the client may still send
	ring []uint32         // the ids added, the oldest overwritten first
	next int              // the ring's next slot
}

// add remembers stream id, whose client may still send left bytes of DATA;
// size is how many streams are remembered.
func (g *gone) add(id uint32, left int64, size int) {
	if g.left == nil {
		g.left = map[uint32]int64{}
		g.ring = make([]uint32, size)
	}
	delete(g.left, g.ring[g.next]) // stream ids are never used twice
	g.ring[g.next] = id
	g.next = (g.next + 1) % len(g.ring)
	g.left[id] = max(left, 0)
}

// data reports whether a DATA frame of n bytes (padding included) of
// stream id is to be ignored: the stream ended as add says, the frame
// fits its window, and it has data or ends the stream. A frame that ends
// the stream, or that does not fit, ends what is remembered of it.
func (g *gone) data(id uint32, n int64, end bool) bool {
	left, ok := g.left[id]
	if !ok {
		return false
	}
	if n > left || (n == 0 && !end) {
		delete(g.left, id)
		return false
	}
	if end {
		delete(g.left, id)
	} else {
		g.left[id] = left - n
	}
	return true
}

// trailers reports whether a HEADERS frame of stream id is the trailers of
// a stream that ended as add says, to be decoded and dropped.
func (g *gone) trailers(id uint32) bool {
	_, ok := g.left[id]
	delete(g.left, id)
	return ok
}
