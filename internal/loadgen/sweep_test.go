package loadgen

import (
	"bytes"
	"context"
	"encoding/xml"
	"strings"
	"testing"
)

func TestGoodputRate(t *testing.T) {
	pts := []SweepPoint{{Rate: 1, Attainment: 1}, {Rate: 2, Attainment: 0.95}, {Rate: 4, Attainment: 0.89}, {Rate: 3, Attainment: 0.9}}
	if g := goodputRate(pts); g != 3 {
		t.Errorf("goodputRate = %v, want 3 (the highest rate with >= 90%%)", g)
	}
	if g := goodputRate([]SweepPoint{{Rate: 1, Attainment: 0.5}}); g != 0 {
		t.Errorf("goodputRate with no rate at 90%% = %v, want 0", g)
	}
}

func TestSweepAgainstFakeServer(t *testing.T) {
	url := streamServer(t, nil)
	base := Options{URL: url, Model: "m", Requests: 6, PromptTokens: 3, GenTokens: 4, Stream: true}
	// A loose objective: every request is good at every rate.
	base.Goodput, _ = ParseGoodput([]string{"e2el:1e9"})
	res, err := Sweep(context.Background(), base, []float64{500, 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 2 || res.Points[0].Attainment != 1 || res.Goodput != 1000 || res.Points[1].Report.RequestRate != "1000" {
		t.Errorf("loose SLO: points %+v goodput %v", res.Points, res.Goodput)
	}
	// An impossible one: nothing is good, so there is no goodput.
	base.Goodput, _ = ParseGoodput([]string{"ttft:0"})
	res, err = Sweep(context.Background(), base, []float64{500}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Points[0].Attainment != 0 || res.Goodput != 0 {
		t.Errorf("impossible SLO: attainment %v goodput %v", res.Points[0].Attainment, res.Goodput)
	}
	if _, err := Sweep(context.Background(), base, []float64{0}, nil); err == nil {
		t.Error("Sweep at rate 0 gave no error")
	}
}

func TestWriteSVG(t *testing.T) {
	s := &SweepResult{Goodput: 2, SLOs: []string{"short.ttft:1000", "tpot:250"},
		Points: []SweepPoint{{Rate: 1, Attainment: 1, P90TTFTMS: 100}, {Rate: 2, Attainment: 0.92, P90TTFTMS: 400}, {Rate: 4, Attainment: 0.3, P90TTFTMS: 5000}}}
	var b bytes.Buffer
	if err := s.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML with two series of three markers and the title.
	d := xml.NewDecoder(&b)
	circles, polylines := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG does not parse: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "circle":
				circles++
			case "polyline":
				polylines++
			}
		}
	}
	if circles != 6 || polylines != 2 {
		t.Errorf("%d markers, %d lines; want 6, 2", circles, polylines)
	}
	b.Reset()
	s.WriteSVG(&b)
	if !strings.Contains(b.String(), "goodput 2 req/s") {
		t.Errorf("no goodput in the title: %s", b.String())
	}
}
