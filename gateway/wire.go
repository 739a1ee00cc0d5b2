package gateway

import "github.com/sluicehq/sluice/internal/http1"

// The gateway's names for the helpers of internal/http1 that nearly every
// file of it calls, on every header of every message.

// equalName reports whether header name k is name, in any case (see
// http1.EqualName).
func equalName(k []byte, name string) bool { return http1.EqualName(k, name) }

// hasToken reports whether the comma-separated list v holds tok, in any
// case (see http1.HasToken).
func hasToken(v []byte, tok string) bool { return http1.HasToken(v, tok) }

// isHop reports whether header k is hop-by-hop, connection being the
// Connection header's value (see http1.IsHop).
func isHop(k, connection []byte) bool { return http1.IsHop(k, connection) }

// oneList returns the values of the headers of one name as one list (see
// http1.OneList).
func oneList(values [][]byte) []byte { return http1.OneList(values) }
