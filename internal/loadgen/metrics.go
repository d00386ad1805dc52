package loadgen

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// MetricNames are the per-request metrics a report can give percentiles of,
// with vLLM's names: time to first token, time per output token after the
// first, inter-token latency (every gap) and end-to-end latency.
var MetricNames = []string{"ttft", "tpot", "itl", "e2el"}

// record is what the report keeps of one completed request, in ms.
type record struct {
	class     string
	ttft, e2e float64
	itl       []float64
	maxGap    float64 // the longest gap between two chunks with text
	in, out   int
}

// tpot is vLLM's time per output token: (e2el - ttft) / (output - 1), and
// false when the request produced at most one token.
func (r *record) tpot() (float64, bool) {
	if r.out <= 1 {
		return 0, false
	}
	return (r.e2e - r.ttft) / float64(r.out-1), true
}

// SLO is one goodput objective: Metric (ttft, tpot, e2el, or itl: the
// longest gap between chunks) at most MS milliseconds, for requests of Class
// ("" for every class).
type SLO struct {
	Class  string
	Metric string
	MS     float64
}

// ParseGoodput parses goodput objectives, "METRIC:MS" or "CLASS.METRIC:MS",
// separated by spaces or commas (vLLM's --goodput ttft:MS tpot:MS e2el:MS,
// plus per-class objectives and itl).
func ParseGoodput(specs []string) ([]SLO, error) {
	var out []SLO
	for _, s := range specs {
		for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			k, v, ok := strings.Cut(f, ":")
			if !ok {
				return nil, fmt.Errorf("goodput objective %q: want METRIC:MS or CLASS.METRIC:MS, e.g. ttft:1000", f)
			}
			var slo SLO
			if c, m, dotted := strings.Cut(k, "."); dotted {
				slo.Class, k = c, m
				if c == "" {
					return nil, fmt.Errorf("goodput objective %q: empty class name", f)
				}
			}
			if k != "ttft" && k != "tpot" && k != "e2el" && k != "itl" {
				return nil, fmt.Errorf("goodput objective %q: metric %q is not one of ttft, tpot, e2el, itl", f, k)
			}
			slo.Metric = k
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) || ms < 0 {
				return nil, fmt.Errorf("goodput objective %q: %q is not a number of milliseconds", f, v)
			}
			slo.MS = ms
			out = append(out, slo)
		}
	}
	return out, nil
}

// good reports whether r meets every objective that applies to its class.
// As in vLLM, a request of at most one token has TPOT 0.
func (r *record) good(slos []SLO) bool {
	for _, s := range slos {
		if s.Class != "" && s.Class != r.class {
			continue
		}
		var v float64
		switch s.Metric {
		case "ttft":
			v = r.ttft
		case "tpot":
			v, _ = r.tpot()
		case "e2el":
			v = r.e2e
		case "itl":
			v = r.maxGap
		}
		if v > s.MS {
			return false
		}
	}
	return true
}

// ParsePercentiles parses "50,90,99" into percentiles in (0, 100].
func ParsePercentiles(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || !(p > 0 && p <= 100) {
			return nil, fmt.Errorf("percentile %q: use numbers in (0, 100], e.g. 50,90,99", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no percentile in %q", s)
	}
	return out, nil
}

// ParseMetricNames parses "ttft,tpot,itl,e2el" (any subset).
func ParseMetricNames(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(MetricNames, f) {
			return nil, fmt.Errorf("metric %q: use any of %s", f, strings.Join(MetricNames, ","))
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no metric in %q", s)
	}
	return out, nil
}

// percentileKey is vLLM's name for percentile p of metric: p99_ttft_ms,
// p99.9_itl_ms.
func percentileKey(p float64, metric string) string {
	return "p" + strconv.FormatFloat(p, 'f', -1, 64) + "_" + metric + "_ms"
}

// Metrics is a block of vLLM-named results: completed, total_input_tokens,
// total_output_tokens, request_throughput, request_goodput (with
// objectives), output_throughput, total_token_throughput, and
// mean_/median_/std_/p{P}_ METRIC _ms for each selected metric.
type Metrics map[string]float64

// computeMetrics summarises recs over a run of durationS seconds.
func computeMetrics(recs []record, durationS float64, metrics []string, pcts []float64, slos []SLO) Metrics {
	m := Metrics{"completed": float64(len(recs))}
	var in, out, good int
	vals := map[string][]float64{}
	for i := range recs {
		r := &recs[i]
		in += r.in
		out += r.out
		vals["ttft"] = append(vals["ttft"], r.ttft)
		vals["e2el"] = append(vals["e2el"], r.e2e)
		vals["itl"] = append(vals["itl"], r.itl...)
		if t, ok := r.tpot(); ok {
			vals["tpot"] = append(vals["tpot"], t)
		}
		if r.good(slos) {
			good++
		}
	}
	m["total_input_tokens"] = float64(in)
	m["total_output_tokens"] = float64(out)
	if durationS > 0 {
		m["request_throughput"] = float64(len(recs)) / durationS
		m["output_throughput"] = float64(out) / durationS
		m["total_token_throughput"] = float64(in+out) / durationS
		if len(slos) > 0 {
			m["request_goodput"] = float64(good) / durationS
		}
	}
	if len(slos) > 0 {
		m["good_completed"] = float64(good)
	}
	for _, name := range metrics {
		s := slices.Clone(vals[name])
		sort.Float64s(s)
		var mean, std float64
		if len(s) > 0 {
			for _, v := range s {
				mean += v
			}
			mean /= float64(len(s))
			for _, v := range s {
				std += (v - mean) * (v - mean)
			}
			std = math.Sqrt(std / float64(len(s)))
		}
		m["mean_"+name+"_ms"] = mean
		m["std_"+name+"_ms"] = std
		m["median_"+name+"_ms"] = pct(s, 50)
		for _, p := range pcts {
			m[percentileKey(p, name)] = pct(s, p)
		}
	}
	return m
}

// pct is percentile of a sorted slice, 0 when it is empty.
func pct(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return percentile(s, p)
}
