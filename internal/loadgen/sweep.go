package loadgen

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
)

// SweepPoint is the outcome of one rate of a sweep.
type SweepPoint struct {
	Rate float64 `json:"request_rate"`
	// Attainment is the share of sent requests that completed and met every
	// goodput objective (failed requests count as missed).
	Attainment float64 `json:"attainment"`
	P90TTFTMS  float64 `json:"p90_ttft_ms"`
	Report     *Report `json:"result"`
}

// SweepResult is a whole sweep and DistServe's goodput: the highest swept
// rate at which at least 90% of requests met the objectives (0 when none).
type SweepResult struct {
	Points  []SweepPoint `json:"points"`
	Goodput float64      `json:"goodput_rate"`
	SLOs    []string     `json:"goodput_slos"`
}

// DistServeAttainment is the share of requests that must meet the
// objectives for a rate to count towards DistServe's goodput.
const DistServeAttainment = 0.9

// Sweep runs o once per rate (open loop; o.RequestRate is replaced) and
// finds the highest rate whose attainment is at least 90%. It stops early,
// returning what ran, when ctx is done. Every rate sends o's prompts, so a
// server's prefix cache must be off for the later rates to mean anything.
func Sweep(ctx context.Context, o Options, rates []float64, progress io.Writer) (*SweepResult, error) {
	if len(rates) == 0 {
		return nil, fmt.Errorf("sweep: no rate given")
	}
	res := &SweepResult{}
	for _, rate := range rates {
		if !(rate > 0) {
			return nil, fmt.Errorf("sweep: rate %v must be positive", rate)
		}
		o.RequestRate = rate
		rep, err := Run(ctx, o, progress)
		if err != nil {
			return nil, fmt.Errorf("sweep at %g req/s: %w", rate, err)
		}
		res.SLOs = rep.GoodputSLOs
		res.Points = append(res.Points, pointOf(rate, rep))
		if rep.Interrupted {
			break
		}
	}
	res.Goodput = goodputRate(res.Points)
	return res, nil
}

func pointOf(rate float64, rep *Report) SweepPoint {
	good := rep.Metrics["good_completed"]
	if len(rep.GoodputSLOs) == 0 {
		good = float64(rep.Completed)
	}
	att := 0.0
	if rep.Requests > 0 {
		att = good / float64(rep.Requests)
	}
	return SweepPoint{Rate: rate, Attainment: att, P90TTFTMS: rep.TTFT.P90, Report: rep}
}

// goodputRate is the highest rate among points with attainment >= 90%.
func goodputRate(points []SweepPoint) float64 {
	best := 0.0
	for _, p := range points {
		if p.Attainment >= DistServeAttainment && p.Rate > best {
			best = p.Rate
		}
	}
	return best
}

// WriteSVG draws attainment (left axis, 0..100%) and p90 TTFT (right axis)
// against request rate, with the 90% line and the goodput rate marked.
func (s *SweepResult) WriteSVG(w io.Writer) error {
	const (
		W, H          = 640.0, 400.0
		left, right   = 60.0, 70.0
		top, bottom   = 40.0, 50.0
		plotW, plotH  = W - left - right, H - top - bottom
		attColour     = "#1f77b4"
		ttftColour    = "#d62728"
		gridColour    = "#dddddd"
		goodputColour = "#2ca02c"
		titleFontSize = 15
		labelFontSize = 12
		markerRadius  = 3.5
	)
	maxRate, maxTTFT := 0.0, 0.0
	for _, p := range s.Points {
		maxRate = math.Max(maxRate, p.Rate)
		maxTTFT = math.Max(maxTTFT, p.P90TTFTMS)
	}
	if maxRate == 0 {
		maxRate = 1
	}
	if maxTTFT == 0 {
		maxTTFT = 1
	}
	maxTTFT *= 1.1
	x := func(r float64) float64 { return left + r/maxRate*plotW }
	yAtt := func(a float64) float64 { return top + (1-a)*plotH }
	yTTFT := func(v float64) float64 { return top + (1-v/maxTTFT)*plotH }
	p := &printer{w: w}
	p.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif">`+"\n", W, H, W, H)
	p.printf(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := fmt.Sprintf("goodput %g req/s (>= 90%% meet %s)", s.Goodput, strings.Join(s.SLOs, " "))
	p.printf(`<text x="%g" y="22" font-size="%d" text-anchor="middle">%s</text>`+"\n", W/2, titleFontSize, xmlEscape(title))
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		y := top + (1-f)*plotH
		p.printf(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="%s"/>`+"\n", left, y, left+plotW, y, gridColour)
		p.printf(`<text x="%g" y="%.1f" font-size="%d" text-anchor="end" fill="%s">%.0f%%</text>`+"\n", left-6, y+4, labelFontSize, attColour, f*100)
		p.printf(`<text x="%g" y="%.1f" font-size="%d" fill="%s">%.0f</text>`+"\n", left+plotW+6, y+4, labelFontSize, ttftColour, f*maxTTFT)
		r := f * maxRate
		p.printf(`<text x="%.1f" y="%g" font-size="%d" text-anchor="middle">%.3g</text>`+"\n", x(r), top+plotH+18, labelFontSize, r)
	}
	p.printf(`<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="black"/>`+"\n", left, top, plotW, plotH)
	p.printf(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="%s" stroke-dasharray="5,4"/>`+"\n", left, yAtt(DistServeAttainment), left+plotW, yAtt(DistServeAttainment), attColour)
	if s.Goodput > 0 {
		p.printf(`<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="%s" stroke-dasharray="2,3"/>`+"\n", x(s.Goodput), top, x(s.Goodput), top+plotH, goodputColour)
	}
	series := func(colour string, y func(SweepPoint) float64) {
		var pts []string
		for _, pt := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt.Rate), y(pt)))
		}
		p.printf(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.Join(pts, " "))
		for _, pt := range s.Points {
			p.printf(`<circle cx="%.1f" cy="%.1f" r="%g" fill="%s"/>`+"\n", x(pt.Rate), y(pt), markerRadius, colour)
		}
	}
	series(attColour, func(pt SweepPoint) float64 { return yAtt(pt.Attainment) })
	series(ttftColour, func(pt SweepPoint) float64 { return yTTFT(pt.P90TTFTMS) })
	p.printf(`<text x="%g" y="%g" font-size="%d" text-anchor="middle">request rate (req/s)</text>`+"\n", left+plotW/2, H-10, labelFontSize)
	p.printf(`<text x="14" y="%g" font-size="%d" fill="%s" transform="rotate(-90 14 %g)" text-anchor="middle">SLO attainment</text>`+"\n", top+plotH/2, labelFontSize, attColour, top+plotH/2)
	p.printf(`<text x="%g" y="%g" font-size="%d" fill="%s" transform="rotate(90 %g %g)" text-anchor="middle">p90 TTFT (ms)</text>`+"\n", W-14, top+plotH/2, labelFontSize, ttftColour, W-14, top+plotH/2)
	p.printf("</svg>\n")
	return p.err
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
