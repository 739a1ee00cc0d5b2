package config

import (
	"fmt"
	"strconv"
	"time"
)

// This file holds the schema, defaults and validation of the flow
// policies a route adds around its attempts: hedging, priority classes and
// the levels of its fallback.

// PriorityClasses are the names of the priority classes, most important
// first (the order of concurrency.Priority).
var PriorityClasses = []string{"critical", "normal", "best_effort"}

// Bounds of the flow policies' values.
const (
	// MaxHedgeWindow bounds hedge.window (latency samples kept).
	MaxHedgeWindow = 10_000
	// MaxLastGoodEntries bounds fallback.last_good.max_entries.
	MaxLastGoodEntries = 1 << 20
	// MinLastGoodBytes and MaxLastGoodBytes bound
	// fallback.last_good.max_bytes.
	MinLastGoodBytes = 1 << 10
	MaxLastGoodBytes = 1 << 30
)

// Hedge sends a second attempt, to another target when the upstream has
// one, when the first has not answered after a delay; the first good
// answer is given and the other attempt is cancelled, its upstream
// connection closed. Only requests that may be sent twice are hedged: an
// idempotent method (GET, HEAD, OPTIONS, PUT, DELETE) and a body kept in
// memory; for gRPC, a unary call of a method the route's grpc.idempotent
// names (see GRPC), whose answer is good when its grpc-status is no
// failure. Each attempt passes the route's circuit breaker and concurrency
// limit and has the route's timeout.
type Hedge struct {
	// Delay is how long the first attempt may run before the hedge is
	// sent. With Quantile it is the delay until the window is full, and
	// the floor of the adaptive delay. Default 100ms.
	Delay Duration `yaml:"delay"`
	// Quantile, in (0, 1), makes the delay adaptive: the Quantile-th
	// latency (0.95 for the 95th percentile) of the route's last Window
	// answered requests, never below Delay, so that only the slowest
	// requests are hedged. Default 0: the delay is Delay.
	Quantile float64 `yaml:"quantile"`
	// MaxDelay caps the adaptive delay; at least Delay. Default: none
	// (0s).
	MaxDelay Duration `yaml:"max_delay"`
	// Window is how many latencies the quantile is taken over. Default
	// 64, at most MaxHedgeWindow.
	Window int `yaml:"window"`
	// Budget is the fraction of the route's requests (over the last 10s)
	// that may be hedged, so that hedges cannot multiply an overload: with
	// 0.1, at most one request in ten gets a second attempt. Default 0.1,
	// in (0, 1].
	Budget float64 `yaml:"budget"`
}

// Priority gives each request of a route a priority class, so that under
// overload the route's adaptive concurrency limit sheds best_effort
// requests first, then normal ones, and keeps a guaranteed share of the
// limit for each class. It needs concurrency.adaptive.
//
// A header is read as any client sent it: a client that may set it may
// raise its own priority. Read a header only when a proxy in front of the
// gateway sets it (and drops the client's), or give the class by route
// (From "route"), matching the important requests by path or host.
type Priority struct {
	// From says where a request's class comes from: "route" (default:
	// every request has the Default class) or "header:NAME" (the class
	// that Values maps the header's value to; Default when the header is
	// absent or its value is not mapped; the least important class of its
	// values when it is sent more than once, best_effort past eight
	// values). NAME is an RFC 9110 token.
	From Source `yaml:"from"`
	// Default is the class of a request From gives none: "critical",
	// "normal" (default) or "best_effort".
	Default string `yaml:"default"`
	// Values maps header values to classes. Default: each class's own
	// name (critical, normal, best_effort), exactly. Only with From
	// "header:NAME".
	Values map[string]string `yaml:"values"`
	// Shares are the fractions of the adaptive limit guaranteed to each
	// class.
	Shares Shares `yaml:"shares"`
}

// Shares are the fractions of an adaptive limit guaranteed to each
// priority class, each in [0, 1], summing to at most 1: a class may always
// have floor(share × limit) requests in flight while the route is below
// its limit, and may borrow what the others leave idle, but never while a
// more important class is being refused.
type Shares struct {
	// Critical's share. Default 0.5.
	Critical float64 `yaml:"critical"`
	// Normal's share. Default 0.3.
	Normal float64 `yaml:"normal"`
	// BestEffort's share. Default 0.
	BestEffort float64 `yaml:"best_effort"`
}

// LastGood keeps the last good answer to each GET request of a route, for
// a fallback; a GET with a body (which is not in the key) neither keeps
// nor gets one. A good answer is a 2xx but 206, read whole by the gateway
// (not streamed), that may be shared: no Set-Cookie, no Cache-Control
// private or no-store, no Vary: * nor a Vary naming an X-Forwarded-*
// header (the gateway sets them per client), to a request without
// Cache-Control no-store. Requests are the same when their method, host,
// path and query, Accept, Accept-Encoding, credentials
// (Authorization, Cookie, X-Api-Key, X-Auth-Token, X-Access-Token) and
// rate-limit key are, and the headers the answer's Vary names: an answer
// is never given to another caller. A reload keeps the answers while these
// settings and the route's upstream, its targets, the route's rewrite,
// request headers, preserve_host and rate-limit key are unchanged.
type LastGood struct {
	// MaxAge is how long an answer may be given after it was received.
	// Default 1m.
	MaxAge Duration `yaml:"max_age"`
	// MaxEntries bounds the answers kept; past it the least recently used
	// is dropped. Default 1024, at most MaxLastGoodEntries.
	MaxEntries int `yaml:"max_entries"`
	// MaxBytes bounds the bytes of the answers kept (bodies, headers and
	// keys); past it the least recently used are dropped, and an answer
	// larger than it is not kept. Default 16 MiB, between
	// MinLastGoodBytes and MaxLastGoodBytes.
	MaxBytes int `yaml:"max_bytes"`
}

// flow fills in the defaults of a route's flow policies.
func (d defaults) flow(path string, p *Policies) {
	if h := p.Hedge; h != nil {
		hp := path + ".hedge"
		d.dur(hp+".delay", &h.Delay, 100*time.Millisecond)
		d.int(hp+".window", &h.Window, 64)
		d.float(hp+".budget", &h.Budget, 0.1)
	}
	if pr := p.Priority; pr != nil {
		pp := path + ".priority"
		if !d.given[pp+".from"] {
			pr.From = Source{Kind: SourceRoute}
		}
		d.str(pp+".default", &pr.Default, "normal")
		if !d.given[pp+".values"] && pr.From.Kind == SourceHeader {
			pr.Values = map[string]string{}
			for _, c := range PriorityClasses {
				pr.Values[c] = c
			}
		}
		d.float(pp+".shares.critical", &pr.Shares.Critical, 0.5)
		d.float(pp+".shares.normal", &pr.Shares.Normal, 0.3)
	}
	if f := p.Fallback; f != nil {
		fp := path + ".fallback"
		d.int(fp+".status", &f.Status, 503)
		d.str(fp+".content_type", &f.ContentType, "application/json")
		d.str(fp+".grpc_status", &f.GRPCStatus, "UNAVAILABLE")
		f.GRPCCode = grpcCode(f.GRPCStatus)
		f.Static = d.given[fp+".status"] || d.given[fp+".content_type"] || d.given[fp+".body"] ||
			(f.Upstream == "" && f.LastGood == nil)
		f.GRPCStatic = f.Static || d.given[fp+".grpc_status"] || d.given[fp+".grpc_message"]
		if lg := f.LastGood; lg != nil {
			lp := fp + ".last_good"
			d.dur(lp+".max_age", &lg.MaxAge, time.Minute)
			d.int(lp+".max_entries", &lg.MaxEntries, 1024)
			d.int(lp+".max_bytes", &lg.MaxBytes, 16<<20)
		}
	}
}

// flow checks a route's flow policies; c is the whole configuration, for
// the fallback's upstream.
func (v *validator) flow(path string, r *Route, c *Config) {
	p := &r.Policies
	if h := p.Hedge; h != nil {
		hp := path + ".hedge"
		v.duration(hp+".delay", h.Delay, MinDuration, MaxDuration)
		if !(h.Quantile >= 0 && h.Quantile < 1) {
			v.at(hp+".quantile", "want a fraction in [0, 1) (0.95 for the 95th percentile), got %v", h.Quantile)
		}
		if h.MaxDelay != 0 {
			v.duration(hp+".max_delay", h.MaxDelay, MinDuration, MaxDuration)
			if h.MaxDelay < h.Delay {
				v.at(hp+".max_delay", "max_delay (%s) is below delay (%s)", fmtDuration(h.MaxDelay.D()), fmtDuration(h.Delay.D()))
			}
		}
		if h.Window < 1 || h.Window > MaxHedgeWindow {
			v.at(hp+".window", "want between 1 and %d latencies, got %d", MaxHedgeWindow, h.Window)
		}
		if h.Budget <= 0 || h.Budget > 1 {
			v.at(hp+".budget", "want a fraction in (0, 1], got %v", h.Budget)
		}
	}
	if pr := p.Priority; pr != nil {
		v.priority(path+".priority", pr, p.Concurrency)
	}
	if f := p.Fallback; f != nil {
		fp := path + ".fallback"
		switch {
		case f.Upstream == "":
		case c.Upstreams[f.Upstream] == nil:
			v.at(fp+".upstream", "no upstream named %q", f.Upstream)
		case f.Upstream == r.Upstream:
			v.at(fp+".upstream", "%q is the route's own upstream: a fallback needs another", f.Upstream)
		}
		if f.GRPCCode < 0 {
			v.at(fp+".grpc_status", "want a gRPC status code's name (OK, UNAVAILABLE, NOT_FOUND, ...) or number (0 to 16), got %q", f.GRPCStatus)
		}
		if p.Coalesce && (f.Upstream != "" || f.LastGood != nil) {
			v.at(fp, "coalesced requests fall back to the static answer only: give either coalesce or the fallback's upstream and last_good")
		}
		if lg := f.LastGood; lg != nil {
			lp := fp + ".last_good"
			v.duration(lp+".max_age", lg.MaxAge, MinDuration, MaxDuration)
			if lg.MaxEntries < 1 || lg.MaxEntries > MaxLastGoodEntries {
				v.at(lp+".max_entries", "want between 1 and %d answers, got %d", MaxLastGoodEntries, lg.MaxEntries)
			}
			if lg.MaxBytes < MinLastGoodBytes || lg.MaxBytes > MaxLastGoodBytes {
				v.at(lp+".max_bytes", "want between %d and %d bytes, got %d", MinLastGoodBytes, MaxLastGoodBytes, lg.MaxBytes)
			}
		}
	}
}

func (v *validator) priority(pp string, pr *Priority, conc *Concurrency) {
	if conc == nil || conc.Adaptive == nil {
		v.at(pp, "priority classes share an adaptive limit: give concurrency.adaptive too")
	}
	header := pr.From.Kind == SourceHeader
	if pr.From.Kind == SourceIP {
		v.at(pp+".from", `want "route" or "header:NAME", got %q`, pr.From)
	}
	v.oneOf(pp+".default", pr.Default, PriorityClasses)
	if len(pr.Values) > 0 && !header {
		v.at(pp+".values", "values map a header's values: give from: \"header:NAME\"")
	}
	for _, val := range sortedKeys(pr.Values) {
		vp := pp + ".values." + val
		if val == "" || !isHeaderValue(val) {
			v.at(vp, "a header value is not empty and has no control characters and no leading or trailing space, got %q", val)
		}
		v.oneOf(vp, pr.Values[val], PriorityClasses)
	}
	sum := 0.0
	for i, f := range []float64{pr.Shares.Critical, pr.Shares.Normal, pr.Shares.BestEffort} {
		if f < 0 || f > 1 {
			v.at(fmt.Sprintf("%s.shares.%s", pp, PriorityClasses[i]), "want a fraction in [0, 1], got %v", f)
		}
		sum += f
	}
	if sum > 1+1e-9 {
		v.at(pp+".shares", "the shares sum to %v: at most 1 of the limit can be guaranteed", sum)
	}
}

// grpcCodes are gRPC's status codes' names, by number.
var grpcCodes = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// grpcCode returns the number of the gRPC status code s names (its name or
// its number), -1 when it names none.
func grpcCode(s string) int {
	for i, name := range grpcCodes {
		if s == name || s == strconv.Itoa(i) {
			return i
		}
	}
	return -1
}
