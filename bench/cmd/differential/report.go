package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// spoofable are the headers an upstream may read as its proxy's word on
// the client (names upper-cased, '_' read as '-', as CGI-style servers do).
var spoofable = map[string]bool{
	"X-FORWARDED-FOR": true, "X-FORWARDED-HOST": true, "X-FORWARDED-PROTO": true, "X-FORWARDED-PORT": true,
	"X-FORWARDED-PREFIX": true, "X-REAL-IP": true, "FORWARDED": true, "X-REQUEST-ID": true,
	"X-ORIGINAL-URL": true, "X-REWRITE-URL": true,
}

// evil marks the corpus's spoofed values.
const evil = "evil"

// flags returns the report's findings on one case (see the command's
// documentation), one line each, prefixed with their letter.
func flags(proxies []*proxy, res []outcome, h2 bool) []string {
	var out []string
	r := slices.IndexFunc(res, func(o outcome) bool { return !o.skipped })
	if r < 0 {
		return nil
	}
	ref := res[r]
	for i := r + 1; i < len(proxies); i++ {
		o := res[i]
		switch {
		case o.skipped:
		case o.forwarded() != ref.forwarded():
			out = append(out, fmt.Sprintf("A %s %s, %s %s", proxies[r].name, verb(ref), proxies[i].name, verb(o)))
		case strictCount(ref) != strictCount(o):
			out = append(out, fmt.Sprintf("A %s forwarded %d requests, %s %d", proxies[r].name, strictCount(ref), proxies[i].name, strictCount(o)))
		}
	}
	for i, p := range proxies {
		for c, rs := range res[i].readings {
			for _, r := range rs[1:] {
				if r.messagesKey() == rs[0].messagesKey() {
					continue
				}
				letter := "B"
				if refuses(rs[0], r) || refuses(r, rs[0]) {
					letter = "R"
				}
				out = append(out, fmt.Sprintf("%s %s connection %d: %s reads %q, %s reads %q", letter, p.name, c,
					rs[0].Parser, rs[0].summary(), r.Parser, r.summary()))
			}
		}
		for _, s := range spoofed(res[i]) {
			out = append(out, fmt.Sprintf("C %s: %s", p.name, s))
		}
	}
	out = append(out, engineFlags(proxies, res, h2)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// engineFlags compares the engines (the proxies named sluice-*) on one
// case: on an HTTP/1.1 case the plaintext ones, by status and request
// lines (engineKey); on an HTTP/2 case every one that ran it, by status,
// how the stream ended and the heads (h2Key). A difference where an
// engine refused the stream and the reference did not is an e.
func engineFlags(proxies []*proxy, res []outcome, h2 bool) []string {
	var engines []int
	for i, p := range proxies {
		if strings.HasPrefix(p.name, "sluice") && (h2 || !p.tls) && !res[i].skipped {
			engines = append(engines, i)
		}
	}
	key := func(i int) string {
		if h2 {
			return res[i].answer.String() + " > " + h2Key(proxies[i], res[i])
		}
		return fmt.Sprint(res[i].answer.statuses) + " > " + engineKey(res[i])
	}
	var out []string
	for _, i := range engines[min(1, len(engines)):] {
		r := engines[0]
		if key(r) == key(i) {
			continue
		}
		letter := "E"
		if res[i].answer.end == refused && res[r].answer.end != refused {
			letter = "e"
		}
		a, b := res[r], res[i]
		if h2 {
			out = append(out, fmt.Sprintf("%s %s %s > %s, %s %s > %s", letter, proxies[r].name, a.answer, h2Key(proxies[r], a),
				proxies[i].name, b.answer, h2Key(proxies[i], b)))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s > %s, %s %s > %s", letter, proxies[r].name, a.answer, engineKey(a),
			proxies[i].name, b.answer, engineKey(b)))
	}
	return out
}

// refused is how an HTTP/2 answer ends when the server refused the stream.
const refused = "rst REFUSED_STREAM"

// h2Key is what net/http read from everything p's upstream got, each
// request's head whole: request line, body length and the header and
// trailer fields sorted by name, the transport's own values masked (the
// Host, naming p's recorder; a generated X-Request-Id; the scheme of p's
// listener in X-Forwarded-Proto), so that engines behind different
// listeners compare. A Content-Length that is the body's length is left
// out: an engine that holds the body whole sends its length, one that
// streams it sends it chunked, and the upstream reads the same body.
func h2Key(p *proxy, o outcome) string {
	scheme := "http"
	if p.tls {
		scheme = "https"
	}
	var b strings.Builder
	for _, rs := range o.readings {
		for _, m := range rs[0].Msgs {
			fmt.Fprintf(&b, "%s %q body=%d {", m.Method, m.Target, len(m.Body))
			hs := slices.DeleteFunc(slices.Clone(m.Header), func(kv [2]string) bool {
				return kv[0] == "Content-Length" && kv[1] == fmt.Sprint(len(m.Body))
			})
			for i, kv := range hs {
				switch {
				case kv[0] == "X-Request-Id" && !strings.Contains(kv[1], evil):
					hs[i][1] = "*"
				case kv[0] == "X-Forwarded-Proto" && kv[1] == scheme:
					hs[i][1] = "$scheme"
				}
			}
			sort.SliceStable(hs, func(i, j int) bool { return hs[i][0] < hs[j][0] })
			for _, kv := range hs {
				fmt.Fprintf(&b, "%s: %q; ", kv[0], kv[1])
			}
			b.WriteString("} ")
		}
		if rs[0].Err != "" {
			b.WriteString("! ")
		}
	}
	return b.String()
}

// refuses reports whether a reads the first messages b reads and then
// refuses what follows: an upstream reading as a would answer an error
// and close, rather than read another request.
func refuses(a, b reading) bool {
	if a.Err == "" || len(a.Msgs) > len(b.Msgs) {
		return false
	}
	return a.messagesKey() == reading{Msgs: b.Msgs[:len(a.Msgs)]}.summary()
}

func verb(o outcome) string {
	if o.forwarded() {
		return "forwarded (answered " + o.answer.String() + ")"
	}
	return "refused (" + o.answer.String() + ")"
}

// strictCount is how many requests net/http read from everything the
// upstream got.
func strictCount(o outcome) int {
	n := 0
	for _, rs := range o.readings {
		n += len(rs[0].Msgs)
	}
	return n
}

// engineKey is what net/http read, without the Host (each proxy forwards
// to a recorder of its own, whose address the Host may name).
func engineKey(o outcome) string {
	var b strings.Builder
	for _, rs := range o.readings {
		for _, m := range rs[0].Msgs {
			fmt.Fprintf(&b, "%s %q body=%d; ", m.Method, m.Target, len(m.Body))
		}
		if rs[0].Err != "" {
			b.WriteString("! ")
		}
	}
	return b.String()
}

// spoofed lists the client's claims that any parser reads in what the
// upstream got.
func spoofed(o outcome) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, rs := range o.readings {
		for _, r := range rs {
			for _, m := range r.Msgs {
				if strings.Contains(m.Host, evil) {
					add(fmt.Sprintf("%s reads Host %q", r.Parser, m.Host))
				}
				if strings.Contains(m.Target, evil) {
					add(fmt.Sprintf("%s reads target %q", r.Parser, m.Target))
				}
				for _, kv := range m.Header {
					name := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(kv[0]), "_", "-"))
					if spoofable[name] && strings.Contains(strings.ToLower(kv[1]), evil) {
						add(fmt.Sprintf("%s reads %s: %q", r.Parser, kv[0], kv[1]))
					}
				}
			}
		}
	}
	return out
}

// report writes the summary table and, for each case with findings (every
// case with verbose), what each proxy's upstream got and how each parser
// read it; then the count of each kind of finding.
func report(w io.Writer, proxies []*proxy, cases []testCase, results [][]outcome, verbose bool) {
	counts := map[byte]int{}
	fmt.Fprintf(w, "%d cases through %d proxies; reference %s\n\n", len(cases), len(proxies), proxies[0].name)
	for ci, c := range cases {
		res := make([]outcome, len(proxies))
		for i := range proxies {
			res[i] = results[i][ci]
		}
		found := flags(proxies, res, c.h2 != nil)
		letters := map[byte]bool{}
		for _, f := range found {
			letters[f[0]] = true
		}
		tag := ""
		for _, l := range []byte("ABCEeR") {
			if letters[l] {
				tag += string(l)
				counts[l]++
			}
		}
		fmt.Fprintf(w, "%-4s %s\n", tag, c.name)
		for i, p := range proxies {
			if res[i].skipped {
				continue
			}
			fmt.Fprintf(w, "       %-18s %-24s > %s\n", p.name, res[i].answer, strictSummary(res[i]))
		}
		for _, f := range found {
			fmt.Fprintf(w, "     %s\n", f)
		}
		if len(found) == 0 && !verbose {
			continue
		}
		if c.h2 != nil {
			fmt.Fprintf(w, "     sent HTTP/2 %s\n", c.h2)
		} else {
			fmt.Fprintf(w, "     sent %s\n", quote(c.raw))
		}
		for i, p := range proxies {
			for k, b := range res[i].conns {
				fmt.Fprintf(w, "     %s upstream connection %d got %s\n", p.name, k, quote(string(b)))
				for _, r := range res[i].readings[k] {
					fmt.Fprintf(w, "       %-9s %s\n", r.Parser, r.summary())
				}
			}
		}
	}
	fmt.Fprintf(w, "\nfindings: A %d (forwarded vs refused), B %d (parsers disagree), C %d (spoofable), E %d (engines differ), e %d (an engine refused the stream: expected), R %d (a parser refuses)\n",
		counts['A'], counts['B'], counts['C'], counts['E'], counts['e'], counts['R'])
}

// strictSummary is what net/http read from everything the upstream got:
// "-" for nothing.
func strictSummary(o outcome) string {
	var s []string
	for _, rs := range o.readings {
		s = append(s, rs[0].summary())
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " | ")
}

// quote quotes s, its middle cut when it is long.
func quote(s string) string {
	if len(s) > 400 {
		s = s[:200] + fmt.Sprintf("...(%d bytes)...", len(s)-400) + s[len(s)-200:]
	}
	return fmt.Sprintf("%q", s)
}
