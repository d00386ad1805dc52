package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"tandem/internal/router/answer"
)

// Error kinds a failed request is counted under (besides "http_<status>").
const (
	kindTimeout     = "timeout"      // the request ran past Options.Timeout
	kindConnection  = "connection"   // no response headers (refused, reset, DNS...)
	kindRead        = "read"         // the response body broke off
	kindBadResponse = "bad_response" // unparsable event, JSON or content type
	kindStreamError = "stream_error" // the server reported an error inside the stream
	kindTruncated   = "truncated"    // the stream ended without [DONE] or a finish reason
	kindNoOutput    = "no_output"    // no text, and no completion tokens in usage
)

// result is the outcome of one request.
type result struct {
	kind     string // error kind; "" when the request succeeded
	msg      string // error message
	canceled bool   // aborted because the run was cancelled

	ttft, e2e    time.Duration
	itl          []float64 // inter-token latencies in ms
	promptTokens int
	outputTokens int
	usage        bool // the token counts came from the server
	class        string
	maxGap       float64 // the longest gap between chunks with text, ms
}

type usage struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
}

type completionRequest struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Temperature   float64        `json:"temperature"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
}

// chatRequest is what the openai-chat backend sends to a chat completions
// endpoint, as vLLM's benchmark does: the prompt as one user message and
// max_completion_tokens.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxCompletionTokens int            `json:"max_completion_tokens"`
	Temperature         float64        `json:"temperature"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	IgnoreEOS           bool           `json:"ignore_eos,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chunk is one streamed event, or a whole non-streaming response. Chat
// deltas are read too, so a chat stream also parses.
type chunk struct {
	Choices []struct {
		Text         string    `json:"text"`
		Message      *chatText `json:"message"`
		Delta        *chatText `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// chatText is a chat message or delta: its answer and, from a reasoning
// model, its reasoning text (both are generated tokens).
type chatText struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
}

func (c *chatText) write(b *strings.Builder) {
	if c != nil {
		b.WriteString(c.ReasoningContent)
		b.WriteString(c.Reasoning)
		b.WriteString(c.Content)
	}
}

// text returns the text the chunk carries and whether any choice finished.
func (c *chunk) text() (string, bool) {
	var b strings.Builder
	finished := false
	for _, ch := range c.Choices {
		b.WriteString(ch.Text)
		ch.Delta.write(&b)
		ch.Message.write(&b)
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			finished = true
		}
	}
	return b.String(), finished
}

// doRequest sends request i and measures it.
func doRequest(ctx context.Context, client *http.Client, o Options, i int) result {
	r := request(ctx, client, o, o.Items[i])
	r.class = o.Items[i].Class
	return r
}

// request sends one item and measures it.
func request(ctx context.Context, client *http.Client, o Options, it Item) result {
	var so *streamOptions
	if o.Stream {
		so = &streamOptions{IncludeUsage: true}
	}
	var req any = completionRequest{
		Model:         o.Model,
		Prompt:        it.Text(),
		MaxTokens:     it.MaxTokens,
		Temperature:   0,
		Stream:        o.Stream,
		StreamOptions: so,
		IgnoreEOS:     o.IgnoreEOS,
	}
	if o.Chat {
		req = chatRequest{
			Model:               o.Model,
			Messages:            []chatMessage{{Role: "user", Content: it.Text()}},
			MaxCompletionTokens: it.MaxTokens,
			Temperature:         0,
			Stream:              o.Stream,
			StreamOptions:       so,
			IgnoreEOS:           o.IgnoreEOS,
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return result{kind: kindBadResponse, msg: fmt.Sprintf("encode request: %v", err)}
	}
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, o.URL+o.Endpoint, bytes.NewReader(body))
	if err != nil {
		return result{kind: kindConnection, msg: fmt.Sprintf("build request: %v", err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	if o.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	if o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.APIKey)
	}

	start := time.Now()
	resp, err := client.Do(hreq)
	if err != nil {
		return failure(ctx, rctx, kindConnection, fmt.Errorf("send request: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return result{kind: fmt.Sprintf("http_%d", resp.StatusCode), msg: errorMessage(resp)}
	}
	var r result
	if o.Stream {
		r = readStream(ctx, rctx, resp.Body, start, it.MaxTokens)
	} else {
		r = readWhole(ctx, rctx, resp.Body, start, it.MaxTokens)
		if r.kind == "" && !r.usage {
			r.outputTokens = it.MaxTokens
		}
	}
	if r.kind == "" && !r.canceled && r.promptTokens == 0 {
		r.promptTokens = it.InputLen
	}
	return r
}

// failure classifies err: a cancelled run, a timed out request, or kind.
func failure(ctx, rctx context.Context, kind string, err error) result {
	switch {
	case ctx.Err() != nil:
		return result{canceled: true}
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return result{kind: kindTimeout, msg: err.Error()}
	}
	return result{kind: kind, msg: err.Error()}
}

// readStream reads an SSE completion stream.
func readStream(ctx, rctx context.Context, body io.Reader, start time.Time, maxTokens int) result {
	// A server that closes right after its last event's data line, without
	// the blank line that ends the event, still has that event read: one
	// more line break after the body ends it (a stream cut inside a line
	// stays truncated).
	sr := answer.NewReader(io.MultiReader(body, strings.NewReader("\n")), MaxEventBytes)
	var (
		times       []time.Time // arrivals of chunks with text
		firstChoice time.Time   // arrival of the first chunk with a choice
		u           *usage
		done        bool
		finished    bool
	)
	for !done {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, answer.ErrEventTooLong) {
				return result{kind: kindBadResponse, msg: err.Error()}
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return failure(ctx, rctx, kindTruncated, errors.New("event stream ended in the middle of a line"))
			}
			return failure(ctx, rctx, kindRead, fmt.Errorf("read event stream: %w", err))
		}
		if !ev.HasData {
			continue // comments (keep-alives) and events without data
		}
		data := ev.Data
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			done = true
			break
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return result{kind: kindBadResponse, msg: fmt.Sprintf("parse event %q: %v", clip(string(data), 120), err)}
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return result{kind: kindStreamError, msg: errorText(c.Error)}
		}
		text, fin := c.text()
		if text != "" {
			times = append(times, time.Now())
		}
		if len(c.Choices) > 0 && firstChoice.IsZero() {
			firstChoice = time.Now()
		}
		finished = finished || fin
		if c.Usage != nil {
			u = c.Usage
		}
	}
	end := time.Now()
	if !done && !finished {
		return failure(ctx, rctx, kindTruncated, errors.New("event stream ended without [DONE] or a finish reason"))
	}
	r := result{e2e: end.Sub(start), outputTokens: len(times)}
	if bad := r.applyUsage(u, maxTokens); bad != "" {
		return result{kind: kindBadResponse, msg: bad}
	}
	if len(times) == 0 {
		// Tokens can render as no text (control tokens, bytes of broken
		// UTF-8): a success when the server counts them, and the first
		// chunk with a choice stands in for the first text.
		if !r.usage || r.outputTokens == 0 {
			return result{kind: kindNoOutput, msg: "the stream carried no text and usage reports no completion tokens"}
		}
		if firstChoice.IsZero() {
			firstChoice = end
		}
		r.ttft = firstChoice.Sub(start)
		return r
	}
	r.ttft = times[0].Sub(start)
	r.itl = interTokenLatencies(times, r.outputTokens)
	for j := 1; j < len(times); j++ {
		r.maxGap = max(r.maxGap, ms(times[j].Sub(times[j-1])))
	}
	return r
}

// interTokenLatencies turns the arrival times of c text chunks into
// inter-token latency samples (ms) for a stream of tokens tokens: one sample
// per gap, unless tokens > c, when the first chunk counts as one token and
// the other tokens-1 are spread evenly over the c-1 gaps, a gap that covers k
// tokens giving k samples of gap/k.
func interTokenLatencies(times []time.Time, tokens int) []float64 {
	gaps := len(times) - 1
	if gaps <= 0 {
		return nil
	}
	intervals := tokens - 1
	if intervals <= gaps {
		out := make([]float64, gaps)
		for j := range out {
			out[j] = ms(times[j+1].Sub(times[j]))
		}
		return out
	}
	out := make([]float64, 0, intervals)
	given := 0
	for j := 0; j < gaps; j++ {
		// Gaps 0..j together cover floor((j+1)*intervals/gaps) >= j+1
		// tokens, since intervals > gaps.
		upto := (j + 1) * intervals / gaps
		k := upto - given
		given = upto
		g := ms(times[j+1].Sub(times[j])) / float64(k)
		for range k {
			out = append(out, g)
		}
	}
	return out
}

// readWhole reads a non-streaming completion response.
func readWhole(ctx, rctx context.Context, body io.Reader, start time.Time, maxTokens int) result {
	data, err := io.ReadAll(io.LimitReader(body, MaxBodyBytes+1))
	end := time.Now()
	if err != nil {
		return failure(ctx, rctx, kindRead, fmt.Errorf("read response: %w", err))
	}
	if len(data) > MaxBodyBytes {
		return result{kind: kindBadResponse, msg: fmt.Sprintf("response body over %d bytes", MaxBodyBytes)}
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return result{kind: kindBadResponse, msg: fmt.Sprintf("parse response %q: %v", clip(string(data), 120), err)}
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return result{kind: kindStreamError, msg: errorText(c.Error)}
	}
	r := result{ttft: end.Sub(start), e2e: end.Sub(start)}
	if bad := r.applyUsage(c.Usage, maxTokens); bad != "" {
		return result{kind: kindBadResponse, msg: bad}
	}
	if text, _ := c.text(); text == "" && (!r.usage || r.outputTokens == 0) {
		return result{kind: kindNoOutput, msg: "the response carried no text and usage reports no completion tokens"}
	}
	return r
}

// applyUsage takes the token counts from the server's usage, when it sent
// any, and returns a complaint when they cannot be right: negative, or more
// completion tokens than max_tokens allowed.
func (r *result) applyUsage(u *usage, maxTokens int) string {
	if u == nil {
		return ""
	}
	if p := u.PromptTokens; p != nil {
		if *p < 0 {
			return fmt.Sprintf("usage.prompt_tokens %d is negative", *p)
		}
		r.promptTokens = *p
	}
	if c := u.CompletionTokens; c != nil {
		if *c < 0 || *c > maxTokens {
			return fmt.Sprintf("usage.completion_tokens %d is outside 0..max_tokens (%d)", *c, maxTokens)
		}
		r.outputTokens = *c
		r.usage = true
	}
	return ""
}

// errorMessage reads the message of an error response: OpenAI's
// {"error":{"message":...}}, {"error":"..."}, {"message":...} or
// {"detail":...}, else the start of the body.
func errorMessage(resp *http.Response) string {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(data, &v) == nil {
		switch {
		case len(v.Error) > 0 && string(v.Error) != "null":
			return errorText(v.Error)
		case v.Message != "":
			return clip(v.Message, 300)
		case len(v.Detail) > 0:
			return clip(string(v.Detail), 300)
		}
	}
	if s := strings.TrimSpace(string(data)); s != "" {
		return clip(s, 300)
	}
	return resp.Status
}

// errorText returns the message of an OpenAI error value: an object with a
// message field, or a string.
func errorText(raw json.RawMessage) string {
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return clip(obj.Message, 300)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return clip(s, 300)
	}
	return clip(string(raw), 300)
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// discoverModel returns the first model id that GET /v1/models lists.
func discoverModel(ctx context.Context, client *http.Client, o Options) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, min(o.Timeout, time.Minute))
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, o.URL+"/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("list models at %s (is the server running? give --model to skip this): %w", o.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list models at %s: %s: %s (give --model to skip this)", o.URL, resp.Status, errorMessage(resp))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return "", fmt.Errorf("list models at %s: read response: %w", o.URL, err)
	}
	if len(data) > MaxBodyBytes {
		return "", fmt.Errorf("list models at %s: response over %d bytes", o.URL, MaxBodyBytes)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return "", fmt.Errorf("list models at %s: parse response: %w", o.URL, err)
	}
	for _, m := range list.Data {
		if m.ID != "" {
			return m.ID, nil
		}
	}
	return "", fmt.Errorf("list models at %s: the server lists no model (give --model)", o.URL)
}
