package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// SVG geometry, in pixels.
const (
	svgW, svgH                        = 960, 440
	svgLeft, svgRight, svgTop, svgBot = 56, 170, 34, 44
	svgPoints                         = 900 // most points per polyline
)

var svgColors = []string{
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
	"#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939",
}

// WriteSVG plots the limit over time of every result of scenario sc (the
// no-limit baseline is left out) as a standalone SVG image: one polyline
// per algorithm (the mean over runs of ticks, at most 900 points), the
// optimum as a dashed black line, steps as grey vertical lines. Limits above
// the top of the plot (4× the largest optimum, or less when no limit goes
// that high) are drawn at the top.
func WriteSVG(w io.Writer, sc Scenario, results []*Result) error {
	var rs []*Result
	for _, r := range results {
		if r.Scenario == sc.Name && !r.Unlimited && len(r.Series) > 0 {
			rs = append(rs, r)
		}
	}
	bw := bufio.NewWriter(w)
	dur := durationOf(sc).Seconds()
	maxOpt, maxLim := 1.0, 1.0
	var segs []Segment
	if len(rs) > 0 {
		segs = rs[0].Segments
	}
	for _, s := range segs {
		maxOpt = math.Max(maxOpt, s.Optimum)
	}
	for _, r := range rs {
		for _, v := range r.Series {
			maxLim = math.Max(maxLim, float64(v))
		}
	}
	ymax := niceCeil(math.Max(1.5*maxOpt, math.Min(maxLim, 4*maxOpt)))
	pw, ph := float64(svgW-svgLeft-svgRight), float64(svgH-svgTop-svgBot)
	x := func(sec float64) float64 { return svgLeft + pw*sec/dur }
	y := func(v float64) float64 { return svgTop + ph*(1-math.Min(v, ymax)/ymax) }

	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgW, svgH, svgW, svgH)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(bw, `<text x="%d" y="20" font-size="14">%s</text>`+"\n", svgLeft,
		html.EscapeString("limit over time: "+sc.Name+" — "+sc.About))
	// Axes and grid.
	for i := 0; i <= 5; i++ {
		v := ymax * float64(i) / 5
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", svgLeft, y(v), svgLeft+pw, y(v))
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", svgLeft-6, y(v)+4, trimFloat(v))
	}
	xstep := niceCeil(dur / 6)
	for t := 0.0; t <= dur+1e-9; t += xstep {
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(t), svgTop, x(t), svgTop+ph)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(t), svgTop+ph+16, trimFloat(t))
	}
	fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">simulated seconds</text>`+"\n", svgLeft+pw/2, svgH-6)
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#444"/>`+"\n", svgLeft, svgTop, pw, ph)
	for _, s := range sc.Steps {
		sx := x(s.At.Seconds())
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#999" stroke-width="2"/>`+"\n", sx, svgTop, sx, svgTop+ph)
	}
	// Optimum.
	var opt []string
	for _, s := range segs {
		opt = append(opt, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(s.Start), y(s.Optimum), x(s.End), y(s.Optimum)))
	}
	if len(opt) > 0 {
		fmt.Fprintf(bw, `<polyline fill="none" stroke="black" stroke-dasharray="6,4" points="%s"/>`+"\n", strings.Join(opt, " "))
	}
	// Limits.
	for i, r := range rs {
		color := svgColors[i%len(svgColors)]
		step := (len(r.Series) + svgPoints - 1) / svgPoints
		var pts strings.Builder
		for a := 0; a < len(r.Series); a += step {
			b := min(len(r.Series), a+step)
			s := 0.0
			for _, v := range r.Series[a:b] {
				s += float64(v)
			}
			t := (float64(a+b) / 2) * r.Tick.Seconds()
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(math.Min(t, dur)), y(s/float64(b-a)))
		}
		fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.TrimSpace(pts.String()))
		ly := svgTop + 10 + 18*i
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n",
			svgW-svgRight+12, ly, svgW-svgRight+32, ly, color)
		fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n", svgW-svgRight+38, ly+4, html.EscapeString(r.Algorithm))
	}
	ly := svgTop + 10 + 18*len(rs)
	fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black" stroke-dasharray="6,4"/>`+"\n",
		svgW-svgRight+12, ly, svgW-svgRight+32, ly)
	fmt.Fprintf(bw, `<text x="%d" y="%d">optimum</text>`+"\n", svgW-svgRight+38, ly+4)
	fmt.Fprintln(bw, `</svg>`)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("sim: writing SVG: %w", err)
	}
	return nil
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v-1e-9 {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
