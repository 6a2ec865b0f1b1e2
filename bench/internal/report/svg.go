package report

import (
	"fmt"
	"math"
	"strings"
)

// Series is one line of a plot; NaN marks a missing point.
type Series struct {
	Name  string
	Color string
	Dash  bool
	Ys    []float64
}

// Plot is a line plot over categorical x values (sessions), with a
// logarithmic y axis: the gateways differ by more than ten times.
type Plot struct {
	Title, XLabel, YLabel string
	Xs                    []int
	Series                []Series
}

const (
	plotW, plotH                         = 640, 400
	marginL, marginR, marginT, marginB   = 70, 150, 40, 50
	innerW, innerH                       = plotW - marginL - marginR, plotH - marginT - marginB
	fontFamily                           = "sans-serif"
	gridColor, axisColor, textColor      = "#ddd", "#444", "#222"
	legendLineLen, legendGap, legendLeft = 24, 20, plotW - marginR + 16
)

// SVG renders p.
func (p *Plot) SVG() string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, y := range s.Ys {
			if y > 0 && !math.IsNaN(y) {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if lo == hi {
		hi = lo * 10
	}
	yPos := func(y float64) float64 {
		return marginT + innerH*(1-(math.Log10(y)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
	}
	xPos := func(i int) float64 {
		if len(p.Xs) == 1 {
			return marginL + innerW/2
		}
		return marginL + float64(innerW)*float64(i)/float64(len(p.Xs)-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n", plotW, plotH, plotW, plotH, fontFamily)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" fill="%s">%s</text>`+"\n", marginL, textColor, esc(p.Title))
	// Horizontal grid at 1, 2, 5 of each decade.
	for d := lo; d < hi*1.001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			y := d * m
			if y > hi*1.001 {
				break
			}
			py := yPos(y)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", marginL, py, marginL+innerW, py, gridColor)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text>`+"\n", marginL-6, py+4, textColor, tick(y))
		}
	}
	for i, x := range p.Xs {
		px := xPos(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", px, marginT, px, marginT+innerH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%d</text>`+"\n", px, marginT+innerH+18, textColor, x)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", marginL, marginT, innerW, innerH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", marginL+innerW/2, plotH-10, textColor, esc(p.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n", marginT+innerH/2, textColor, esc(p.YLabel))
	for k, s := range p.Series {
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for i, y := range s.Ys {
			if y > 0 && !math.IsNaN(y) && i < len(p.Xs) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xPos(i), yPos(y)))
			}
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.Color, dash)
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.Color)
			}
		}
		ly := marginT + 10 + k*legendGap
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", legendLeft, ly, legendLeft+legendLineLen, ly, s.Color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", legendLeft+legendLineLen+6, ly+4, textColor, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func tick(y float64) string {
	if y >= 1000 {
		return fmt.Sprintf("%gk", y/1000)
	}
	return fmt.Sprintf("%g", y)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// gatewayStyle gives each gateway its colour; the floor is dashed.
func gatewayStyle(name string) (string, bool) {
	switch name {
	case "floor":
		return "#777777", true
	case "mcpgate":
		return "#1f5fbf", false
	case "supergateway":
		return "#e07b00", false
	case "mcp-proxy":
		return "#2a9d3a", false
	}
	return "#aa3377", false
}

// Plots returns the session plots of r by file name: p50, p99 and
// throughput against sessions, one line per gateway.
func (r *Results) Plots() map[string]*Plot {
	var xs []int
	for _, k := range r.Loads() {
		if k.Scenario == "sessions" {
			xs = append(xs, k.Sessions)
		}
	}
	mk := func(title, ylabel string, f func(*LoadRun) float64) *Plot {
		p := &Plot{Title: title, XLabel: "concurrent sessions (1 KiB echo)", YLabel: ylabel, Xs: xs}
		for _, g := range r.Gateways {
			color, dash := gatewayStyle(g)
			s := Series{Name: g, Color: color, Dash: dash}
			for _, x := range xs {
				y := math.NaN()
				if l := r.Find("sessions", g, x, 1024); l != nil && l.Result != nil && l.Result.Calls > 0 {
					y = f(l)
				}
				s.Ys = append(s.Ys, y)
			}
			p.Series = append(p.Series, s)
		}
		return p
	}
	return map[string]*Plot{
		"p50.svg":        mk("Median latency of tools/call (lower is better)", "p50 (ms, log scale)", func(l *LoadRun) float64 { return l.Result.P50 }),
		"p99.svg":        mk("99th percentile latency of tools/call (lower is better)", "p99 (ms, log scale)", func(l *LoadRun) float64 { return l.Result.P99 }),
		"throughput.svg": mk("Throughput (higher is better)", "calls/s (log scale)", func(l *LoadRun) float64 { return l.Result.CallsPerSec }),
	}
}
