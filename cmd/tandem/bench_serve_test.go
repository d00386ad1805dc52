package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"tandem/internal/loadgen"
)

func TestBenchOptions(t *testing.T) {
	o := loadgen.Options{Requests: 20, PromptTokens: 50, GenTokens: 9, Burstiness: 1, Seed: 1}
	if err := benchOptions(&o, "mixed", "long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128", "", 0, 0, 0,
		[]string{"short.ttft:1000 long.ttft:10000 tpot:250"}, "ttft,itl", "90,99"); err != nil {
		t.Fatal(err)
	}
	if len(o.Items) != 20 || len(o.Goodput) != 3 || len(o.PercentileMetrics) != 2 || len(o.MetricPercentiles) != 2 {
		t.Errorf("items %d goodput %v metrics %v percentiles %v", len(o.Items), o.Goodput, o.PercentileMetrics, o.MetricPercentiles)
	}
	o = loadgen.Options{Requests: 5, PromptTokens: 50, GenTokens: 9, Burstiness: 1}
	if err := benchOptions(&o, "random", "", "", 0, 0, 0, nil, "ttft", "99"); err != nil {
		t.Fatal(err)
	}
	if it := o.Items[0]; it.InputLen != 50 || it.MaxTokens != 9 {
		t.Errorf("random dataset defaults to --prompt-tokens/--gen-tokens: item %+v", it)
	}
	p := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(p, []byte(`{"prompt":"a b","max_tokens":3,"class":"x"}`+"\n"), 0o644)
	o = loadgen.Options{Requests: 4, Burstiness: 1}
	if err := benchOptions(&o, "", "", p, 0, 0, 0, nil, "ttft", "99"); err != nil || len(o.Items) != 4 || o.Items[3].Class != "x" {
		t.Errorf("dataset path: %v, %+v", err, o.Items)
	}
	for name, f := range map[string]func(*loadgen.Options) error{
		"bad dataset": func(o *loadgen.Options) error { return benchOptions(o, "sharegpt", "", "", 0, 0, 0, nil, "ttft", "99") },
		"bad ratio":   func(o *loadgen.Options) error { return benchOptions(o, "random", "", "", 0, 0, 1, nil, "ttft", "99") },
		"bad goodput": func(o *loadgen.Options) error {
			return benchOptions(o, "", "", "", 0, 0, 0, []string{"ttft"}, "ttft", "99")
		},
		"bad mixed":    func(o *loadgen.Options) error { return benchOptions(o, "mixed", "a", "", 0, 0, 0, nil, "ttft", "99") },
		"path and mix": func(o *loadgen.Options) error { return benchOptions(o, "mixed", "", p, 0, 0, 0, nil, "ttft", "99") },
		"missing file": func(o *loadgen.Options) error { return benchOptions(o, "", "", p+".no", 0, 0, 0, nil, "ttft", "99") },
		"negative rate": func(o *loadgen.Options) error {
			o.RequestRate = -1
			return benchOptions(o, "", "", "", 0, 0, 0, nil, "ttft", "99")
		},
		"nan burst": func(o *loadgen.Options) error {
			o.Burstiness = math.NaN()
			return benchOptions(o, "", "", "", 0, 0, 0, nil, "ttft", "99")
		},
	} {
		o := loadgen.Options{Requests: 2, PromptTokens: 4, GenTokens: 2, Burstiness: 1}
		if err := f(&o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
