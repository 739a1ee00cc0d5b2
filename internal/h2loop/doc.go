// Package h2loop is the server side of HTTP/2 connections (RFC 9113)
// without I/O, for event loops: a loop feeds a connection the bytes it read
// (Conn.Feed), and writes what the connection has to send (Conn.Output).
// Nothing blocks and nothing starts a goroutine: a request whose headers
// and body have arrived whole is handed to a Handler, which answers it at
// once or later (Conn.Respond) on the loop's goroutine. A StreamHandler
// may take a stream at its HEADERS instead (StreamHandler.Open): its body
// then comes as it arrives, the stream's window opening only as the
// handler consumes it (Conn.Consumed), and its answer goes in parts
// (Conn.WriteHeaders, Conn.WriteData, Conn.WriteTrailers) as flow control
// allows.
//
// The connection reads a frame only once all of it is buffered, with
// golang.org/x/net/http2's Framer, and header blocks with its hpack
// decoder. It implements the preface, SETTINGS and their acknowledgement,
// PING, WINDOW_UPDATE, RST_STREAM, GOAWAY, HEADERS with CONTINUATION
// (request headers and trailers), DATA with connection and stream flow
// control both ways, and the stream states and protocol errors of RFC
// 9113, and extended CONNECT (RFC 8441) when offered. A malformed request
// is reset (PROTOCOL_ERROR), but those that net/http's HTTP/2 server
// answers rather than resets, which go to a StreamHandler marked
// (Stream.Malformed) for it to answer alike. A request it holds
// whole must fit in one stream window (see Config.StreamWindow): a larger
// body of a stream not taken is refused (REFUSED_STREAM).
//
// Hostile peers are bounded from the start: concurrent streams, the
// decoded header list, the CONTINUATION frames and bytes of one header
// block, client resets of streams still being served (rapid reset,
// CVE-2023-44487), control frames (PING, SETTINGS, PRIORITY, unknown
// types) and empty DATA frames between two requests, and the response
// bytes held back by flow control (see Config). A peer past a bound gets
// GOAWAY with ENHANCE_YOUR_CALM and the connection ends (Conn.Closed).
// Output a peer does not read is the caller's to bound: it stops feeding
// a connection whose output waits, which then takes no new request.
//
// A Conn is used by one goroutine at a time.
package h2loop
