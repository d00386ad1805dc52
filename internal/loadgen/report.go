package loadgen

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteText writes the report as an aligned, human-readable table.
func (r *Report) WriteText(w io.Writer) error {
	mode := "streaming"
	if !r.Stream {
		mode = "not streaming"
	}
	p := &printer{w: w}
	if r.RequestRate != "" && r.RequestRate != "0" {
		p.printf("server       %s, model %s (%s, open loop)\n", r.URL, r.Model, mode)
	} else {
		p.printf("server       %s, model %s (%s, concurrency %d)\n", r.URL, r.Model, mode, r.Concurrency)
	}
	p.printf("requests     %d ok, %d failed, %d canceled (of %d)", r.Completed, r.Failed, r.Canceled, r.Requests)
	if r.Interrupted {
		p.printf(" - interrupted")
	}
	p.printf("\n")
	p.printf("duration     %.3f s\n", r.DurationS)
	p.printf("throughput   %.3f req/s, %.2f output tok/s, %.2f total tok/s\n", r.RequestThroughput, r.OutputTokS, r.TotalTokS)
	if r.Dataset {
		p.printf("tokens       %d prompt, %d output (server usage for %d of %d requests)\n",
			r.PromptTokens, r.OutputTokens, r.UsageReported, r.Completed)
	} else {
		p.printf("tokens       %d prompt, %d output (server usage for %d of %d requests; nominal %d prompt, %d max output)\n",
			r.PromptTokens, r.OutputTokens, r.UsageReported, r.Completed, r.NominalPromptTokens, r.GenTokens)
	}
	p.printf("%-12s %10s %10s %10s %10s %8s\n", "latency ms", "mean", "p50", "p90", "p99", "samples")
	for _, row := range []struct {
		name string
		s    Stats
	}{{"TTFT", r.TTFT}, {"TPOT", r.TPOT}, {"ITL", r.ITL}, {"E2E", r.E2E}} {
		p.printf("%-12s %10.2f %10.2f %10.2f %10.2f %8d\n", row.name, row.s.Mean, row.s.P50, row.s.P90, row.s.P99, row.s.N)
	}
	if r.RequestRate != "" && r.RequestRate != "0" {
		p.printf("arrivals     %s req/s, burstiness %g, max concurrency %d (peak %d in flight)\n", r.RequestRate, r.Burstiness, r.MaxConcurrency, r.MaxConcurrentRequests)
	}
	if len(r.GoodputSLOs) > 0 {
		p.printf("goodput      %.3f req/s, %g of %d good (%v)\n", r.Metrics["request_goodput"], r.Metrics["good_completed"], r.Completed, r.GoodputSLOs)
	}
	classes := make([]string, 0, len(r.Classes))
	for c := range r.Classes {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		m := r.Classes[c]
		p.printf("class %-6s %g ok", c, m["completed"])
		if len(r.GoodputSLOs) > 0 {
			p.printf(", %g good (%.3f req/s)", m["good_completed"], m["request_goodput"])
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			if strings.HasSuffix(k, "_ms") && (strings.HasPrefix(k, "mean_") || strings.HasPrefix(k, "p")) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p.printf(", %s %.1f", strings.TrimSuffix(k, "_ms"), m[k])
		}
		p.printf("\n")
	}
	if len(r.Errors) > 0 {
		kinds := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		p.printf("errors\n")
		for _, k := range kinds {
			p.printf("  %-14s %6d", k, r.Errors[k])
			if m := r.ErrorExamples[k]; m != "" {
				p.printf("  e.g. %s", m)
			}
			p.printf("\n")
		}
	}
	return p.err
}

// printer remembers the first write error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
