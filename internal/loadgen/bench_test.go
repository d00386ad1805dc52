package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestComputeMetricsAsVLLM(t *testing.T) {
	recs := []record{
		{class: "a", ttft: 100, e2e: 1000, itl: []float64{100, 100}, maxGap: 300, in: 10, out: 10},
		{class: "a", ttft: 300, e2e: 500, in: 5, out: 1},
	}
	m := computeMetrics(recs, 2, MetricNames, []float64{50, 99, 99.9}, []SLO{{Metric: "tpot", MS: 50}, {Metric: "ttft", MS: 200}})
	want := map[string]float64{
		"completed": 2, "total_input_tokens": 15, "total_output_tokens": 11,
		"request_throughput": 1, "output_throughput": 5.5, "total_token_throughput": 13,
		// tpot = (1000-100)/(10-1) = 100 for the first; the second has one token.
		"mean_tpot_ms": 100, "median_tpot_ms": 100, "std_tpot_ms": 0,
		"mean_ttft_ms": 200, "median_ttft_ms": 200, "std_ttft_ms": 100, "p50_ttft_ms": 200, "p99_ttft_ms": 298,
		"p99.9_ttft_ms": 299.8, "mean_e2el_ms": 750, "mean_itl_ms": 100,
		// The first misses tpot:50; the second has TPOT 0 (one token) but misses ttft:200.
		"good_completed": 0, "request_goodput": 0,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if g := computeMetrics(recs, 2, MetricNames, []float64{99}, []SLO{{Metric: "ttft", MS: 1000}, {Class: "a", Metric: "itl", MS: 200}}); g["good_completed"] != 1 {
		t.Errorf("good_completed %v with itl:200 (the first request has a 300 ms gap), want 1", g["good_completed"])
	}
}

func TestParseGoodput(t *testing.T) {
	s, err := ParseGoodput([]string{"short.ttft:1000 long.ttft:10000", "tpot:250,e2el:5e3"})
	if err != nil {
		t.Fatal(err)
	}
	want := []SLO{{"short", "ttft", 1000}, {"long", "ttft", 10000}, {"", "tpot", 250}, {"", "e2el", 5000}}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("ParseGoodput = %v, want %v", s, want)
	}
	for _, bad := range []string{"ttft", "foo:1", "ttft:-1", "ttft:x", ".ttft:1"} {
		if _, err := ParseGoodput([]string{bad}); err == nil {
			t.Errorf("ParseGoodput(%q) gave no error", bad)
		}
	}
	if _, err := ParsePercentiles("50,0"); err == nil {
		t.Error("ParsePercentiles(50,0) gave no error")
	}
	if _, err := ParseMetricNames("ttft,nope"); err == nil {
		t.Error("ParseMetricNames(ttft,nope) gave no error")
	}
}

// streamServer answers each request with max_tokens one-word chunks and
// usage counting the prompt's words.
func streamServer(t *testing.T, before func(m map[string]any)) string {
	var s seen
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		m := s.add(t, r)
		if before != nil {
			before(m)
		}
		n := int(m["max_tokens"].(float64))
		var ev []string
		for i := 0; i < n; i++ {
			ev = append(ev, textChunk(" w"))
		}
		p, _ := m["prompt"].(string)
		ev = append(ev, finishChunk, usageChunk(len(strings.Fields(p)), n), doneEvent)
		writeSSE(w, ev...)
	})
	return srv.URL
}

func TestRunOpenLoopHonoursMaxConcurrency(t *testing.T) {
	var mu sync.Mutex
	cur, peak, arrived := 0, 0, 0
	bothIn := make(chan struct{})
	url := streamServer(t, func(map[string]any) {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		arrived++
		if arrived == 2 {
			close(bothIn)
		}
		first := arrived <= 2
		mu.Unlock()
		if first {
			<-bothIn // the first two are in flight together
		}
		mu.Lock()
		cur--
		mu.Unlock()
	})
	rep, err := Run(context.Background(), Options{URL: url, Model: "m", Requests: 8, PromptTokens: 4, GenTokens: 3, Stream: true,
		RequestRate: math.Inf(1), MaxConcurrency: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 8 || peak != 2 || rep.MaxConcurrentRequests > 2 || rep.MaxConcurrency != 2 || rep.RequestRate != "+Inf" {
		t.Errorf("completed %d, server peak in flight %d, client peak %d, max_concurrency %d, rate %q; want 8, 2, <=2, 2, +Inf",
			rep.Completed, peak, rep.MaxConcurrentRequests, rep.MaxConcurrency, rep.RequestRate)
	}
}

func TestRunMixedGoodputAndVLLMJSON(t *testing.T) {
	cs, err := ParseMixed("long:share=0.5,in=40,out=2;short:share=0.5,in=5,out=6")
	if err != nil {
		t.Fatal(err)
	}
	items := MixedItems(12, cs, 3)
	nLong := 0
	for _, it := range items {
		if it.Class == "long" {
			nLong++
		}
	}
	slos, _ := ParseGoodput([]string{"long.ttft:0 short.e2el:1e9"}) // no long request meets 0 ms
	// A rate high enough that the fake server makes it quick; the schedule
	// is what is exercised, not its timing.
	rep, err := Run(context.Background(), Options{URL: streamServer(t, nil), Model: "m", Items: items, Stream: true,
		RequestRate: 1000, Burstiness: 0.5, Goodput: slos, MetricPercentiles: []float64{90, 99}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	type block struct {
		Completed            *int     `json:"completed"`
		GoodCompleted        *int     `json:"good_completed"`
		TotalInputTokens     *int     `json:"total_input_tokens"`
		TotalOutputTokens    *int     `json:"total_output_tokens"`
		RequestThroughput    *float64 `json:"request_throughput"`
		RequestGoodput       *float64 `json:"request_goodput"`
		OutputThroughput     *float64 `json:"output_throughput"`
		TotalTokenThroughput *float64 `json:"total_token_throughput"`
		MeanTTFT             *float64 `json:"mean_ttft_ms"`
		MedianTTFT           *float64 `json:"median_ttft_ms"`
		StdTTFT              *float64 `json:"std_ttft_ms"`
		P99TTFT              *float64 `json:"p99_ttft_ms"`
		P90TPOT              *float64 `json:"p90_tpot_ms"`
		P99ITL               *float64 `json:"p99_itl_ms"`
		MeanE2EL             *float64 `json:"mean_e2el_ms"`
	}
	var v struct {
		block
		Duration *float64         `json:"duration"`
		Classes  map[string]block `json:"classes"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	check := func(name string, bl block, completed, good, in, out int) {
		if bl.Completed == nil || bl.GoodCompleted == nil || bl.TotalInputTokens == nil || bl.TotalOutputTokens == nil ||
			bl.RequestThroughput == nil || bl.RequestGoodput == nil || bl.OutputThroughput == nil || bl.TotalTokenThroughput == nil ||
			bl.MeanTTFT == nil || bl.MedianTTFT == nil || bl.StdTTFT == nil || bl.P99TTFT == nil || bl.P99ITL == nil || bl.MeanE2EL == nil {
			t.Fatalf("%s: a vLLM field is missing in %s", name, b)
		}
		if *bl.Completed != completed || *bl.GoodCompleted != good || *bl.TotalInputTokens != in || *bl.TotalOutputTokens != out {
			t.Errorf("%s: completed %d good %d input %d output %d; want %d %d %d %d", name, *bl.Completed, *bl.GoodCompleted,
				*bl.TotalInputTokens, *bl.TotalOutputTokens, completed, good, in, out)
		}
		if *bl.P99TTFT <= 0 || *bl.P99TTFT < *bl.MedianTTFT || (good == 0) != (*bl.RequestGoodput == 0) {
			t.Errorf("%s: p99 ttft %v median %v goodput %v", name, *bl.P99TTFT, *bl.MedianTTFT, *bl.RequestGoodput)
		}
	}
	nShort := 12 - nLong
	if nLong == 0 || nShort == 0 {
		t.Fatalf("seed 3 gave %d long of 12; pick a seed with both classes", nLong)
	}
	check("overall", v.block, 12, nShort, 40*nLong+5*nShort, 2*nLong+6*nShort)
	check("long", v.Classes["long"], nLong, 0, 40*nLong, 2*nLong)
	check("short", v.Classes["short"], nShort, nShort, 5*nShort, 6*nShort)
	if v.Duration == nil || *v.Duration <= 0 || v.P90TPOT == nil {
		t.Errorf("duration %v, p90_tpot_ms %v", v.Duration, v.P90TPOT)
	}
}
