package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits on what a server may make the client hold.
const (
	// MaxEventBytes caps one event of an event stream (its lines, with
	// their line breaks).
	MaxEventBytes = 1 << 20
	// MaxBodyBytes caps a non-streaming response body and a /v1/models reply.
	MaxBodyBytes = 16 << 20
	// maxErrorBody caps how much of an error response is read for its message.
	maxErrorBody = 8 << 10
	// Upper bounds on options, far above any sensible run, so that a typo
	// gets an error instead of an enormous allocation.
	maxConcurrency  = 1 << 16
	maxRequests     = 1 << 24
	maxPromptTokens = 1 << 20
	maxGenTokens    = 1 << 20
)

// Options configures a run.
type Options struct {
	// URL is the server's base address, e.g. http://127.0.0.1:8000. A
	// trailing "/" or "/v1" is dropped; requests go to URL/v1/completions.
	URL string
	// Endpoint is the path requests are POSTed to under URL (default
	// DefaultEndpoint, or DefaultChatEndpoint when Chat is set).
	Endpoint string
	// Chat sends chat completions requests (vLLM's openai-chat backend):
	// the prompt as one user message, max_completion_tokens; Endpoint must
	// then end in /chat/completions, and must not otherwise.
	Chat bool
	// Model is the model id sent with each request; when empty, the first id
	// listed by GET URL/v1/models is used.
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer APIKey".
	APIKey string
	// Concurrency is the number of workers, each with one request in flight
	// (default 1; at most Requests are started).
	Concurrency int
	// Requests is the total number of requests to send (default 1).
	Requests int
	// PromptTokens is the nominal prompt length: the prompt has this many
	// words (default 128).
	PromptTokens int
	// GenTokens is max_tokens for each request (default 128).
	GenTokens int
	// Stream asks for a server-sent event stream; without it TTFT equals
	// E2E and there are no ITL samples.
	Stream bool
	// IgnoreEOS sends "ignore_eos": true so every request generates
	// GenTokens tokens on servers that support it.
	IgnoreEOS bool
	// Seed chooses the prompts; the same seed gives the same prompts.
	Seed uint64
	// Timeout bounds each request, from send to the end of the response
	// (default 5 minutes).
	Timeout time.Duration
	// ProgressInterval is how often a progress line is written when the
	// progress writer is not a terminal (default 5 s). On a terminal a bar
	// is redrawn in place several times a second.
	ProgressInterval time.Duration

	// RequestRate, when positive, makes the run open-loop: requests are
	// sent at Arrivals(Requests, RequestRate, Burstiness, Seed) whatever is
	// in flight, +Inf sending them all at once. Zero keeps the closed loop
	// of Concurrency workers.
	RequestRate float64
	// Burstiness is the gamma shape of open-loop intervals (default 1:
	// Poisson).
	Burstiness float64
	// MaxConcurrency, when positive, caps the requests in flight under
	// open-loop arrivals; a request due while the cap is reached waits.
	MaxConcurrency int
	// Items are the requests to send (prompt, max_tokens, class); when nil,
	// Requests prompts of PromptTokens words with max_tokens GenTokens.
	// When set, Requests is len(Items).
	Items []Item
	// Goodput are the objectives a request must all meet to count as good.
	Goodput []SLO
	// PercentileMetrics and MetricPercentiles choose the metrics and
	// percentiles of the vLLM-named results (defaults ttft,tpot,itl,e2el
	// and 50,90,99).
	PercentileMetrics []string
	MetricPercentiles []float64

	dataset bool // Items were given, not made from PromptTokens and GenTokens
}

// Default endpoints of the two backends.
const (
	DefaultEndpoint     = "/v1/completions"
	DefaultChatEndpoint = "/v1/chat/completions"
)

// Report is the outcome of a run. Token rates and request throughput are
// over completed requests and the wall time of the whole run.
type Report struct {
	URL                 string            `json:"url"`
	Backend             string            `json:"backend"`
	Endpoint            string            `json:"endpoint"`
	Model               string            `json:"model"`
	Stream              bool              `json:"stream"`
	Concurrency         int               `json:"concurrency"`
	Requests            int               `json:"requests"`
	Completed           int               `json:"completed"`
	Failed              int               `json:"failed"`
	Canceled            int               `json:"canceled"`
	Interrupted         bool              `json:"interrupted"`
	DurationS           float64           `json:"duration_s"`
	RequestThroughput   float64           `json:"request_throughput"`
	OutputTokS          float64           `json:"output_tok_s"`
	TotalTokS           float64           `json:"total_tok_s"`
	NominalPromptTokens int               `json:"nominal_prompt_tokens"`
	GenTokens           int               `json:"gen_tokens"`
	PromptTokens        int64             `json:"prompt_tokens"`
	OutputTokens        int64             `json:"output_tokens"`
	UsageReported       int               `json:"usage_reported"`
	TTFT                Stats             `json:"ttft_ms"`
	ITL                 Stats             `json:"itl_ms"`
	TPOT                Stats             `json:"tpot_ms"`
	E2E                 Stats             `json:"e2e_ms"`
	Errors              map[string]int    `json:"errors"`
	ErrorExamples       map[string]string `json:"error_examples,omitempty"`

	// Fields named as in vLLM's result JSON.
	Duration             float64 `json:"duration"`
	TotalInputTokens     int64   `json:"total_input_tokens"`
	TotalOutputTokens    int64   `json:"total_output_tokens"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	// RequestRate is the configured rate ("inf" for all at once; 0 for the
	// closed loop) and MaxConcurrency the cap under open loop (0: none).
	RequestRate           string  `json:"request_rate"`
	Burstiness            float64 `json:"burstiness"`
	MaxConcurrency        int     `json:"max_concurrency"`
	MaxConcurrentRequests int     `json:"max_concurrent_requests"`
	// GoodputSLOs echoes the objectives, "CLASS.METRIC:MS" or "METRIC:MS".
	GoodputSLOs []string `json:"goodput_slos,omitempty"`
	// Metrics are the vLLM-named results over every completed request
	// (request_goodput, mean_ttft_ms, p99_ttft_ms...), written at the top
	// level of the JSON; Classes the same per request class.
	Metrics Metrics            `json:"-"`
	Classes map[string]Metrics `json:"classes,omitempty"`
	// Dataset is true when the requests came from Options.Items rather than
	// PromptTokens and GenTokens (which then do not describe them).
	Dataset bool `json:"dataset"`
}

func (o Options) withDefaults() (Options, error) {
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Requests == 0 {
		o.Requests = 1
	}
	if o.PromptTokens == 0 {
		o.PromptTokens = 128
	}
	if o.GenTokens == 0 {
		o.GenTokens = 128
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = 5 * time.Second
	}
	switch {
	case o.Concurrency < 1 || o.Concurrency > maxConcurrency:
		return o, fmt.Errorf("concurrency %d is out of range: use 1..%d", o.Concurrency, maxConcurrency)
	case o.Requests < 1 || o.Requests > maxRequests:
		return o, fmt.Errorf("requests %d is out of range: use 1..%d", o.Requests, maxRequests)
	case o.PromptTokens < 1 || o.PromptTokens > maxPromptTokens:
		return o, fmt.Errorf("prompt tokens %d is out of range: use 1..%d", o.PromptTokens, maxPromptTokens)
	case o.GenTokens < 1 || o.GenTokens > maxGenTokens:
		return o, fmt.Errorf("gen tokens %d is out of range: use 1..%d", o.GenTokens, maxGenTokens)
	case o.Timeout < 0:
		return o, fmt.Errorf("timeout %v is negative", o.Timeout)
	case o.ProgressInterval < 0:
		return o, fmt.Errorf("progress interval %v is negative", o.ProgressInterval)
	}
	o.dataset = o.Items != nil
	if o.Items != nil {
		if len(o.Items) == 0 || len(o.Items) > maxRequests {
			return o, fmt.Errorf("%d requests in the dataset: use 1..%d", len(o.Items), maxRequests)
		}
		o.Requests = len(o.Items)
	} else {
		o.Items = RandomItems(o.Requests, o.PromptTokens, o.GenTokens, 0, o.Seed)
	}
	if o.Burstiness == 0 {
		o.Burstiness = 1
	}
	if o.RequestRate < 0 || math.IsNaN(o.RequestRate) {
		return o, fmt.Errorf("request rate %v must be positive, inf, or 0 for the closed loop", o.RequestRate)
	}
	if o.MaxConcurrency < 0 || o.MaxConcurrency > maxConcurrency {
		return o, fmt.Errorf("max concurrency %d is out of range: use 0 (no cap) .. %d", o.MaxConcurrency, maxConcurrency)
	}
	if len(o.PercentileMetrics) == 0 {
		o.PercentileMetrics = MetricNames
	}
	if len(o.MetricPercentiles) == 0 {
		o.MetricPercentiles = []float64{50, 90, 99}
	}
	if o.Concurrency > o.Requests {
		o.Concurrency = o.Requests
	}
	base, err := baseURL(o.URL)
	if err != nil {
		return o, err
	}
	o.URL = base
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
		if o.Chat {
			o.Endpoint = DefaultChatEndpoint
		}
	}
	if err := checkEndpoint(o.Endpoint, o.Chat); err != nil {
		return o, err
	}
	return o, nil
}

// checkEndpoint checks that an endpoint path suits the backend: vLLM's
// openai-chat backend wants one ending in chat/completions, the
// completions backend one that does not.
func checkEndpoint(ep string, chat bool) error {
	if !strings.HasPrefix(ep, "/") || strings.ContainsAny(ep, "?# ") {
		return fmt.Errorf("endpoint %q must be a path starting with /, e.g. %s", ep, DefaultEndpoint)
	}
	isChat := strings.HasSuffix(strings.TrimRight(ep, "/"), "chat/completions")
	switch {
	case chat && !isChat:
		return fmt.Errorf("endpoint %q: the openai-chat backend sends chat messages, so the endpoint must end in chat/completions (e.g. %s)", ep, DefaultChatEndpoint)
	case !chat && isChat:
		return fmt.Errorf("endpoint %q is a chat endpoint: use the openai-chat backend for it (--backend openai-chat)", ep)
	}
	return nil
}

// baseURL checks a server address and strips a trailing "/" or "/v1".
func baseURL(s string) (string, error) {
	if s == "" {
		return "", errors.New("server URL is empty: give the base address, e.g. http://127.0.0.1:8000")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("parse server URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("server URL %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("server URL %q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("server URL %q: a query or fragment is not allowed", s)
	}
	s = strings.TrimRight(s, "/")
	s = strings.TrimSuffix(s, "/v1")
	return strings.TrimRight(s, "/"), nil
}

// newClient returns an HTTP client whose transport keeps one idle
// connection per worker, so connections are reused between requests.
func newClient(concurrency int) *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		MaxIdleConns:          concurrency + 8,
		MaxIdleConnsPerHost:   concurrency + 8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Compression would make a proxy or server buffer the event stream.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}
	return &http.Client{Transport: tr}
}

// tally merges the results of finished requests.
type tally struct {
	mu            sync.Mutex
	ttft, itl     []float64
	e2e           []float64
	promptTokens  int64
	outputTokens  int64
	usage         int
	errors        map[string]int
	errorExamples map[string]string
	recs          []record

	completed, failed, canceled atomic.Int64
}

func (t *tally) add(r *result) {
	switch {
	case r.canceled:
		t.canceled.Add(1)
		return
	case r.kind != "":
		t.mu.Lock()
		t.errors[r.kind]++
		if _, ok := t.errorExamples[r.kind]; !ok && r.msg != "" {
			t.errorExamples[r.kind] = r.msg
		}
		t.mu.Unlock()
		t.failed.Add(1)
		return
	}
	t.mu.Lock()
	t.ttft = append(t.ttft, ms(r.ttft))
	t.e2e = append(t.e2e, ms(r.e2e))
	t.itl = append(t.itl, r.itl...)
	t.recs = append(t.recs, record{class: r.class, ttft: ms(r.ttft), e2e: ms(r.e2e), itl: r.itl, maxGap: r.maxGap, in: r.promptTokens, out: r.outputTokens})
	t.promptTokens += int64(r.promptTokens)
	t.outputTokens += int64(r.outputTokens)
	if r.usage {
		t.usage++
	}
	t.mu.Unlock()
	t.completed.Add(1)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Run sends o.Requests completion requests from o.Concurrency workers and
// reports what happened. Progress goes to progress (nil: none): a bar redrawn
// in place when progress is a terminal, else a line every
// o.ProgressInterval. Failed requests are counted in the report, not
// returned as an error; Run fails only on bad options or when the model
// cannot be discovered. When ctx is cancelled Run stops sending, aborts the
// requests in flight and returns the report of what completed with
// Interrupted set.
func Run(ctx context.Context, o Options, progress io.Writer) (*Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("bench serve: %w", err)
	}
	client := newClient(max(o.Concurrency, min(o.MaxConcurrency, 1024), 64))
	defer client.CloseIdleConnections()
	if o.Model == "" {
		o.Model, err = discoverModel(ctx, client, o)
		if err != nil {
			return nil, fmt.Errorf("bench serve: %w", err)
		}
	}
	var sched []time.Duration
	if o.RequestRate > 0 {
		if sched, err = Arrivals(o.Requests, o.RequestRate, o.Burstiness, o.Seed); err != nil {
			return nil, fmt.Errorf("bench serve: %w", err)
		}
	}
	t := &tally{errors: map[string]int{}, errorExamples: map[string]string{}}
	if o.Stream {
		t.itl = make([]float64, 0, min(o.Requests*o.GenTokens, 1<<20))
	}
	start := time.Now()
	stopProgress := startProgress(progress, o, t, start)
	var inFlight, peak atomic.Int64
	send := func(i int) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		r := doRequest(ctx, client, o, i)
		inFlight.Add(-1)
		t.add(&r)
	}
	var wg sync.WaitGroup
	if o.RequestRate == 0 {
		var next atomic.Int64
		for w := 0; w < o.Concurrency; w++ {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= o.Requests {
						return
					}
					send(i)
				}
			})
		}
	} else {
		openLoop(ctx, o, sched, start, &wg, send)
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	backend := "openai"
	if o.Chat {
		backend = "openai-chat"
	}
	rep := &Report{
		URL:                 o.URL,
		Backend:             backend,
		Endpoint:            o.Endpoint,
		Model:               o.Model,
		Stream:              o.Stream,
		Concurrency:         o.Concurrency,
		Requests:            o.Requests,
		Completed:           int(t.completed.Load()),
		Failed:              int(t.failed.Load()),
		Canceled:            int(t.canceled.Load()),
		Interrupted:         ctx.Err() != nil && int(t.completed.Load()+t.failed.Load()) < o.Requests,
		DurationS:           elapsed.Seconds(),
		NominalPromptTokens: o.PromptTokens,
		GenTokens:           o.GenTokens,
		PromptTokens:        t.promptTokens,
		OutputTokens:        t.outputTokens,
		UsageReported:       t.usage,
		TTFT:                Summarize(t.ttft),
		ITL:                 Summarize(t.itl),
		E2E:                 Summarize(t.e2e),
		Errors:              t.errors,
		ErrorExamples:       t.errorExamples,
	}
	rep.Duration = rep.DurationS
	rep.Dataset = o.dataset
	rep.TotalInputTokens, rep.TotalOutputTokens = rep.PromptTokens, rep.OutputTokens
	rep.Burstiness = o.Burstiness
	rep.MaxConcurrency = o.MaxConcurrency
	rep.MaxConcurrentRequests = int(peak.Load())
	rep.RequestRate = strconv.FormatFloat(o.RequestRate, 'g', -1, 64)
	for _, slo := range o.Goodput {
		k := slo.Metric
		if slo.Class != "" {
			k = slo.Class + "." + k
		}
		rep.GoodputSLOs = append(rep.GoodputSLOs, k+":"+strconv.FormatFloat(slo.MS, 'g', -1, 64))
	}
	var tpots []float64
	for i := range t.recs {
		if v, ok := t.recs[i].tpot(); ok {
			tpots = append(tpots, v)
		}
	}
	rep.TPOT = Summarize(tpots)
	rep.Metrics = computeMetrics(t.recs, rep.DurationS, o.PercentileMetrics, o.MetricPercentiles, o.Goodput)
	byClass := map[string][]record{}
	for _, r := range t.recs {
		if r.class != "" {
			byClass[r.class] = append(byClass[r.class], r)
		}
	}
	for c, recs := range byClass {
		if rep.Classes == nil {
			rep.Classes = map[string]Metrics{}
		}
		rep.Classes[c] = computeMetrics(recs, rep.DurationS, o.PercentileMetrics, o.MetricPercentiles, o.Goodput)
	}
	if s := rep.DurationS; s > 0 {
		rep.RequestThroughput = float64(rep.Completed) / s
		rep.OutputTokS = float64(rep.OutputTokens) / s
		rep.TotalTokS = float64(rep.PromptTokens+rep.OutputTokens) / s
		rep.OutputThroughput, rep.TotalTokenThroughput = rep.OutputTokS, rep.TotalTokS
	}
	return rep, nil
}

// openLoop sends request i at start+Arrivals(...)[i], waiting for a slot
// first when MaxConcurrency caps the requests in flight, until every request
// is sent or ctx is done.
func openLoop(ctx context.Context, o Options, sched []time.Duration, start time.Time, wg *sync.WaitGroup, send func(int)) {
	var sem chan struct{}
	if o.MaxConcurrency > 0 {
		sem = make(chan struct{}, o.MaxConcurrency)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i, at := range sched {
		if d := time.Until(start.Add(at)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() != nil {
			if sem != nil {
				<-sem
			}
			return
		}
		wg.Go(func() {
			send(i)
			if sem != nil {
				<-sem
			}
		})
	}
}

// MarshalJSON writes the report's fields with the vLLM-named Metrics at the
// top level beside them (completed, request_goodput, mean_ttft_ms,
// p99_itl_ms...), so tools that read vLLM's result JSON read it; as vLLM,
// request_goodput is null when the run had no goodput objectives.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	b, err := json.Marshal((*plain)(r))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range r.Metrics {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	if _, ok := m["request_goodput"]; !ok {
		m["request_goodput"] = nil // vLLM writes null without goodput objectives
	}
	return json.Marshal(m)
}
