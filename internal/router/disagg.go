package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"tandem/internal/api/httpx"
	apileg "tandem/internal/api/leg"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/router/answer"
	"tandem/internal/router/pool"
)

// Selective disaggregation: the router decides per request whether its
// samples go to a prefill and a decode worker (disaggregated) or as one
// local leg to a decode worker, which then prefills the prompt itself
// inside its continuous batch. A prompt shorter than Options.PDThreshold
// tokens runs locally: its prefill is cheap enough that a decode step
// carrying it stays short, and it skips the queue of the prefill workers
// and the KV transfer. A long prompt is disaggregated, so its prefill does
// not stall the decode worker's running sequences.
//
// How the router counts a prompt's tokens, cheapest first:
//   - a completions prompt of token ids: their number (exact);
//   - text: its bytes bound the tokens from above (every token of a
//     byte-level BPE or byte-fallback vocabulary covers at least one byte;
//     2 are added for BOS and EOS; a chat request counts the raw JSON of
//     its messages and tools, which is longer than their text, plus
//     chatTemplateMargin tokens for the template's own text). A bound under
//     the threshold decides local at no cost;
//   - text whose bound is at least tokenizeBand times the threshold is
//     taken as long without counting: it would need more than tokenizeBand
//     bytes per token to be short, which natural text and code do not
//     have (about 4 for English);
//   - in between, the router asks a decode worker's POST /tokenize (one
//     loopback round trip and a tokenization) and uses the exact count. If
//     that fails, the request is disaggregated (reason count_failed).
//
// The whole prompt counts as uncached: the router does not know which
// prefixes the decode worker's prefix cache holds.
//
// Spilling a long prompt to a decode worker (Options.PDSpill, reason
// prefill_busy): when the prefill workers are behind, a long prompt may
// finish its prefill sooner on a decode worker, inside its batch and
// within its ITL target (--itl-target), than in the prefill queue. The
// router compares the queued prefill tokens the workers report in
// /pd/status (plus the prompts it sent each since that report): with Qp
// on the least-queued prefill worker, Qd on the least-queued decode
// worker and n the prompt's tokens, the prompt runs locally when
// Qp + n >= PDSpill·(Qd + n). Prefill time is about linear in tokens on
// either side, so this compares finishing times up to the ratio of their
// prefill rates. Cost-model arithmetic for the 110m Q8_0 model on one
// thread per worker (about 6 ms a step, 2 ms per decoding sequence, 2.2
// ms per prefill token): a prefill worker feeds ~430 tokens/s in full
// 512-token chunks; a decode worker with 5 sequences decoding has ~130 of
// a 150 ms target left per step, ~60 tokens, ~400 tokens/s. So PDSpill 1.1
// would be break-even for the long prompt; 2 spills only when the local
// prefill would finish in about half the time, because while a decode
// worker prefills a long prompt its steps last the whole target (150 ms
// instead of ~20), which its short prompts' TTFT and every decode gap pay.
// Measured, even 2 costs short prompts more than it gains: the default is
// 0, never (DefaultPDSpill). Spilled prompts count on the decode worker's
// queue, so a second spill needs the prefill queue to be further behind.
// Only prompts decided long_prompt spill: not count_failed or
// threshold_off ones.

// Paths and reasons: the labels of tandem_router_pd_decisions_total and the
// decision in /debug/rooms.
const (
	pathLocal         = "local"
	pathDisaggregated = "disaggregated"

	reasonShortPrompt  = "short_prompt"      // fewer tokens than the threshold
	reasonLongPrompt   = "long_prompt"       // at least the threshold
	reasonPrefillBusy  = "prefill_busy"      // long, but the prefill queue is PDSpill times the decode worker's
	reasonNoPrefill    = "no_prefill_worker" // long, but no prefill worker could be picked
	reasonCountFailed  = "count_failed"      // the prompt could not be counted
	reasonThresholdOff = "threshold_off"     // PDThreshold 0: every request is disaggregated
)

// How a decision counted the prompt (debugdoc.Decision.CountedBy).
const (
	countTokenIDs  = "token_ids"  // a prompt of token ids: exact
	countByteBound = "byte_bound" // bytes, an upper bound on the tokens
	countTokenize  = "tokenize"   // a decode worker's /tokenize: exact
)

// DefaultPDSpill is `tandem route`'s and `tandem up`'s --pd-spill (see
// above): 0, never spill. Measured on the mixed goodput load
// (docs/measurements/2026-12-01-goodput-2), a spill ratio of 2 let short
// prompts on the decode worker wait behind a spilled long prefill (short
// TTFT p90 ~1.2 s from 2 req/s, attainment 87.5-89.6%), where without
// spilling 1P1D met the SLO for every request up to 3 req/s.
const DefaultPDSpill = 0.0

const (
	// bytesPerToken turns a prompt's byte bound into a token estimate for
	// queue accounting (English text and code run about 4 bytes a token
	// in byte-level BPE vocabularies; the bound itself assumes 1).
	bytesPerToken = 4
	// chatTemplateMargin is what a chat request's bound adds for the
	// template's own text (role markers, a default system prompt).
	chatTemplateMargin = 64
	// tokenizeBand: text whose byte bound is at least this many times the
	// threshold is long without asking a worker.
	tokenizeBand = 8
	// decideParallelMax bounds the decisions (and so /tokenize calls) one
	// request's list of prompts makes at a time.
	decideParallelMax = 8
	// countTimeout bounds the /tokenize call of a decision.
	countTimeout = 2 * time.Second
	// countBodyBytesMax bounds a /tokenize answer read for a count (its
	// token ids: at most tokenizeBand*threshold of them).
	countBodyBytesMax = 16 << 20
)

// decision is where a request's samples go and why.
type decision struct {
	path, reason string
	tokens       int    // the prompt's tokens as counted (-1: not counted)
	countedBy    string // one of the count* values, "" when not counted
	threshold    int
	// prefillQueue and localQueue are the queues a spill weighed (nil:
	// not weighed).
	prefillQueue, localQueue *int
}

// doc renders d for /debug/rooms.
func (d decision) doc() *debugdoc.Decision {
	return &debugdoc.Decision{Path: d.path, Reason: d.reason, PromptTokens: d.tokens, CountedBy: d.countedBy, Threshold: d.threshold,
		PrefillQueueTokens: d.prefillQueue, LocalQueueTokens: d.localQueue}
}

// work is the prefill work of d's prompt in tokens, for queue accounting:
// the count when exact, a byte bound divided by bytesPerToken, 0 when not
// counted.
func (d decision) work() int {
	switch {
	case d.tokens <= 0:
		return 0
	case d.countedBy == countByteBound:
		return (d.tokens + bytesPerToken - 1) / bytesPerToken
	}
	return d.tokens
}

// spill decides whether a long prompt runs as a local leg on a decode
// worker because the prefill workers are behind (see the comment at the
// top): it returns the decision to send it with and true, or false.
func (rt *Router) spill(d decision, exclude []*pool.Worker) (decision, bool) {
	if rt.o.PDSpill <= 0 || rt.o.PDThreshold <= 0 || d.reason != reasonLongPrompt {
		return d, false
	}
	qp, qd, ok := rt.workers.LeastQueued(exclude)
	if !ok {
		return d, false
	}
	n := d.work()
	d.prefillQueue, d.localQueue = &qp, &qd
	if float64(qp+n) < rt.o.PDSpill*float64(qd+n) {
		return d, false
	}
	return d.withPath(pathLocal, reasonPrefillBusy), true
}

// withPath returns d sent another way for another reason (a fallback).
func (d decision) withPath(path, reason string) decision {
	d.path, d.reason = path, reason
	return d
}

// decideAll returns the decision for each prompt of req (one when its
// prompt is not a list of several): a list's prompts are decided each on
// its own length, up to decideParallelMax at a time (a decision may ask a
// worker to count).
func (rt *Router) decideAll(ctx context.Context, req *clientRequest) []decision {
	if req.prompts == nil {
		return []decision{rt.decide(ctx, req)}
	}
	ds := make([]decision, len(req.prompts))
	sem := make(chan struct{}, decideParallelMax)
	var wg sync.WaitGroup
	for p := range req.prompts {
		one := *req
		one.obj, one.prompts = req.promptObj(p), nil
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ds[p] = rt.decide(ctx, &one)
		})
	}
	wg.Wait()
	return ds
}

// decide chooses the path of req's samples (see the comment above); req
// has one prompt.
func (rt *Router) decide(ctx context.Context, req *clientRequest) decision {
	th := rt.o.PDThreshold
	d := decision{path: pathDisaggregated, tokens: -1, threshold: th}
	if th <= 0 {
		d.reason = reasonThresholdOff
		return d
	}
	bound, exact, ok := promptBound(req)
	if !ok {
		d.reason = reasonCountFailed
		return d
	}
	d.tokens, d.countedBy = bound, countByteBound
	if exact {
		d.countedBy = countTokenIDs
	}
	switch {
	case bound < th:
		d.path, d.reason = pathLocal, reasonShortPrompt
		return d
	case exact || bound >= tokenizeBand*th:
		d.reason = reasonLongPrompt
		return d
	}
	n, err := rt.countTokens(ctx, req)
	if err != nil {
		rt.log.Warn("cannot count a prompt's tokens; disaggregating it", "request", req.requestID, "err", err)
		d.reason, d.tokens, d.countedBy = reasonCountFailed, -1, ""
		return d
	}
	d.tokens, d.countedBy = n, countTokenize
	if n < th {
		d.path, d.reason = pathLocal, reasonShortPrompt
	} else {
		d.reason = reasonLongPrompt
	}
	return d
}

// promptBound returns an upper bound on req's prompt tokens, whether it is
// exact (token ids), and false when the prompt is not one the router can
// read (the worker will refuse it; it is disaggregated, reason
// count_failed).
func promptBound(req *clientRequest) (n int, exact, ok bool) {
	if req.ep.chat {
		msgs, ok := req.obj.Get("messages")
		if !ok {
			return 0, false, false
		}
		n = len(msgs) + chatTemplateMargin
		if tools, ok := req.obj.Get("tools"); ok {
			n += len(tools)
		}
		return n, false, true
	}
	raw, ok := req.obj.Get("prompt")
	if !ok {
		return 0, false, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return len(s) + 2, false, true
	}
	var ids []json.RawMessage
	if json.Unmarshal(raw, &ids) != nil || len(ids) == 0 {
		return 0, false, false
	}
	if json.Unmarshal(ids[0], &s) == nil && len(ids) == 1 { // ["text"]
		return len(s) + 2, false, true
	}
	var inner []json.RawMessage
	if len(ids) == 1 && json.Unmarshal(ids[0], &inner) == nil { // [[ids]]
		return len(inner), true, true
	}
	return len(ids), true, true
}

// tokenizeBody returns the /tokenize body that counts req's prompt as the
// worker's generation endpoint renders it.
func tokenizeBody(req *clientRequest) ([]byte, error) {
	o := answer.Object{}
	if req.ep.chat {
		for _, k := range []string{"messages", "tools", "chat_template_kwargs", "add_generation_prompt"} {
			if v, ok := req.obj.Get(k); ok {
				o = o.Set(k, v)
			}
		}
		return o.Marshal(), nil
	}
	raw, _ := req.obj.Get("prompt")
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var one []string
		if json.Unmarshal(raw, &one) != nil || len(one) != 1 {
			return nil, fmt.Errorf("the prompt is not text")
		}
		s = one[0]
	}
	return o.Set("prompt", answer.Quote(s)).Marshal(), nil
}

// countTokens asks a healthy decode worker's /tokenize for the number of
// tokens of req's prompt.
func (rt *Router) countTokens(ctx context.Context, req *clientRequest) (int, error) {
	body, err := tokenizeBody(req)
	if err != nil {
		return 0, err
	}
	wk, err := rt.workers.Pick(pool.Decode, nil, nil, 0)
	if err != nil {
		return 0, err
	}
	defer rt.workers.Release(wk)
	ctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.URL()+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := rt.tokenizerClient().Do(hr)
	if err != nil {
		return 0, fmt.Errorf("count tokens on %s: %w", wk.URL(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		api := readWorkerError(resp)
		return 0, fmt.Errorf("count tokens on %s: status %d: %s", wk.URL(), resp.StatusCode, api.Message)
	}
	var doc struct {
		Count *int `json:"count"`
	}
	b, err := httpx.ReadAllMax(resp.Body, countBodyBytesMax)
	if err != nil {
		return 0, fmt.Errorf("count tokens on %s: %w", wk.URL(), err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Count == nil || *doc.Count < 0 {
		return 0, fmt.Errorf("count tokens on %s: the answer has no count (%v)", wk.URL(), err)
	}
	return *doc.Count, nil
}

// phases records a succeeded disaggregated attempt's worker timings (the
// prefill leg's queue, prefill and transfer, the decode leg's first decode
// step) in its record and in tandem_router_ttft_phase_seconds.
func (rt *Router) phases(rec *record, prefill, decode apileg.Timing) {
	t := prefill
	t.FirstDecode = decode.FirstDecode
	rt.recs.setTiming(rec, t)
	for _, p := range []struct {
		name string
		d    *time.Duration
	}{{"queue", t.Queue}, {"prefill", t.Prefill}, {"transfer", t.Transfer}, {"first_decode", t.FirstDecode}} {
		if p.d != nil {
			rt.met.ttftPhase.WithLabelValues(p.name).Observe(p.d.Seconds())
		}
	}
}
