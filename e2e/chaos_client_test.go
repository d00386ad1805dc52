package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strings"
	"time"
)

// The chaos soak's clients: what a request asks for, how its client may
// walk away, and how its answer is judged. Every answer gets exactly one
// outcome: completed (a whole, consistent answer), a clear error (an
// OpenAI error object with a message, as an HTTP error status or as one
// SSE error event), disconnected (the client walked away first), pinned
// (the hard client timeout hit) or bad (anything else: a truncated 200, a
// malformed or doubled answer, a broken connection without an error).

// promptWords is the vocabulary of the soak's prompts. The synthesized
// model's tokenizer splits such a word into about three tokens.
var promptWords = strings.Fields(`the cat sat on a mat and then ran away quickly into house garden little girl
named lily loved to play outside in park one day she saw big red ball under tree happy dog barked`)

// tokensPerWord is what promptWords cost on average with the synthesized
// tiny model's vocabulary (measured: 100 words, about 300 prompt tokens).
const tokensPerWord = 3

// disconnect says when a client walks away from its request.
type disconnect int

const (
	stayConnected   disconnect = iota
	leaveAfterDelay            // cancel after a random delay, often before the first bytes
	leaveAtHeaders             // cancel as soon as the response headers arrive
	leaveMidAnswer             // cancel after reading part of the answer
)

func (d disconnect) String() string {
	return [...]string{"none", "after-delay", "at-headers", "mid-answer"}[d]
}

// chaosRequest is one request of the soak, drawn from its own seeded
// generator so the set of requests depends only on the soak's seed.
type chaosRequest struct {
	i           int
	chat        bool
	stream      bool
	n           int
	maxTokens   int
	temperature float64
	seed        int64
	ignoreEOS   bool
	words       int
	keepAlive   bool // false: the client closes its connection after the answer
	leave       disconnect
	leaveDelay  time.Duration // leaveAfterDelay
	leaveAfter  int           // leaveMidAnswer: events (stream) or bytes (not) read first
	body        []byte
}

// drawRequest makes request i of a soak with the given seed; frac is the
// fraction of requests whose client disconnects.
func drawRequest(seed int64, i int, frac float64) *chaosRequest {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	r := &chaosRequest{i: i, chat: rng.IntN(4) == 0, stream: rng.IntN(2) == 0, n: 1,
		maxTokens: 1 + rng.IntN(64), ignoreEOS: rng.IntN(2) == 0, keepAlive: rng.IntN(4) != 0}
	if rng.IntN(10) == 0 {
		r.n = 2
	}
	if rng.IntN(2) == 1 {
		r.temperature = 0.1 + 1.4*rng.Float64()
		r.seed = rng.Int64N(1 << 31)
	}
	tokens := 1 + rng.IntN(600)
	r.words = max(1, tokens/tokensPerWord)
	if rng.Float64() < frac {
		r.leave = disconnect(1 + rng.IntN(3))
		r.leaveDelay = time.Duration(rng.IntN(300)) * time.Millisecond
		r.leaveAfter = 1 + rng.IntN(8)
		if !r.stream {
			r.leaveAfter = 1 + rng.IntN(200)
		}
	}
	words := make([]string, r.words)
	for k := range words {
		words[k] = promptWords[rng.IntN(len(promptWords))]
	}
	prompt := strings.Join(words, " ")
	req := map[string]any{"max_tokens": r.maxTokens, "temperature": r.temperature, "stream": r.stream, "n": r.n,
		"ignore_eos": r.ignoreEOS}
	if r.temperature > 0 {
		req["seed"] = r.seed
	}
	if r.stream {
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	if r.chat {
		req["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		req["prompt"] = prompt
	}
	r.body, _ = json.Marshal(req) // only strings, numbers and bools
	return r
}

func (r *chaosRequest) path() string {
	if r.chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// String describes the request for failure messages.
func (r *chaosRequest) String() string {
	kind := "completion"
	if r.chat {
		kind = "chat"
	}
	s := fmt.Sprintf("#%d %s stream=%v n=%d max_tokens=%d temperature=%.2f ignore_eos=%v words=%d keepalive=%v",
		r.i, kind, r.stream, r.n, r.maxTokens, r.temperature, r.ignoreEOS, r.words, r.keepAlive)
	if r.leave != stayConnected {
		s += fmt.Sprintf(" disconnect=%s(delay %s, after %d)", r.leave, r.leaveDelay, r.leaveAfter)
	}
	return s
}

// outcomeKind classifies how a request ended.
type outcomeKind int

const (
	outcomeCompleted outcomeKind = iota
	outcomeClearError
	outcomeDisconnected
	outcomePinned
	outcomeBad
)

func (k outcomeKind) String() string {
	return [...]string{"completed", "clear error", "disconnected", "pinned", "bad"}[k]
}

// outcome is how one request ended. kind says which; detail says what
// error the client got ("http 502 upstream_error", "sse error
// upstream_error") or, for a bad one, what was wrong.
type outcome struct {
	req        *chaosRequest
	kind       outcomeKind
	detail     string
	message    string // the error message, for clear errors
	start, end time.Time
	usage      chaosUsage
	router     string // the answer's X-Tandem-Router: which router served it ("" when no answer came)
	requestID  string // the answer's X-Request-Id: the id its rooms carry on the workers
}

// chaosUsage is the usage object of an answer.
type chaosUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

var (
	errLeave  = errors.New("the client disconnected on purpose")
	errPinned = errors.New("the hard client timeout passed")
)

// chaosClients are the two HTTP clients requests use: one keeps its
// connections, the other closes each after its answer (as curl does).
type chaosClients struct {
	keep, close *http.Client
}

func newChaosClients(conns int) *chaosClients {
	keep := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: conns, DisableCompression: true}
	closing := &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}
	return &chaosClients{keep: &http.Client{Transport: keep}, close: &http.Client{Transport: closing}}
}

func (c *chaosClients) closeIdle() {
	c.keep.CloseIdleConnections()
	c.close.CloseIdleConnections()
}

// answerBytesMax bounds what the soak reads of one answer.
const answerBytesMax = 8 << 20

// run sends r to base and judges its answer within hardTimeout.
func (r *chaosRequest) run(cs *chaosClients, base string, hardTimeout time.Duration) (o outcome) {
	o = outcome{req: r, start: time.Now()}
	defer func() { o.end = time.Now() }()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, hardTimeout, errPinned)
	defer cancelTimeout()
	if r.leave == leaveAfterDelay {
		t := time.AfterFunc(r.leaveDelay, func() { cancel(errLeave) })
		defer t.Stop()
	}
	// ended classifies an error that cut the exchange short.
	ended := func(what string, err error) outcome {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errLeave):
			o.kind = outcomeDisconnected
		case errors.Is(cause, errPinned):
			o.kind, o.detail = outcomePinned, fmt.Sprintf("no end within %s (%s)", hardTimeout, what)
		default:
			o.kind, o.detail = outcomeBad, fmt.Sprintf("%s: %v", what, err)
		}
		return o
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+r.path(), bytes.NewReader(r.body))
	if err != nil {
		o.kind, o.detail = outcomeBad, fmt.Sprintf("make request: %v", err)
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	client := cs.keep
	if !r.keepAlive {
		client = cs.close
	}
	resp, err := client.Do(req)
	if err != nil {
		return ended("send the request", err)
	}
	defer resp.Body.Close()
	o.router, o.requestID = resp.Header.Get("X-Tandem-Router"), resp.Header.Get("X-Request-Id")
	if r.leave == leaveAtHeaders {
		cancel(errLeave)
		o.kind = outcomeDisconnected
		return o
	}
	body := io.Reader(io.LimitReader(resp.Body, answerBytesMax))
	if resp.StatusCode != http.StatusOK {
		b, err := r.readMaybeLeaving(body, cancel)
		if err != nil {
			return ended(fmt.Sprintf("read the %s answer", resp.Status), err)
		}
		return judgeErrorStatus(o, resp.StatusCode, b)
	}
	if r.stream {
		return r.judgeStream(o, resp, body, cancel, ended)
	}
	b, err := r.readMaybeLeaving(body, cancel)
	if err != nil {
		return ended("read the answer", err)
	}
	return r.judgeWhole(o, b)
}

// readMaybeLeaving reads a whole non-streamed body; a client that leaves
// mid-answer cancels after leaveAfter bytes and gets errLeave.
func (r *chaosRequest) readMaybeLeaving(body io.Reader, cancel context.CancelCauseFunc) ([]byte, error) {
	if r.leave != leaveMidAnswer {
		return io.ReadAll(body)
	}
	head := make([]byte, r.leaveAfter)
	n, err := io.ReadFull(body, head)
	if err != nil {
		// The whole answer was shorter than the prefix: it is complete.
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return head[:n], nil
		}
		return nil, err
	}
	cancel(errLeave)
	_, err = io.ReadAll(body)
	if err == nil {
		err = errLeave // everything had already arrived, but the client left before it looked
	}
	return nil, err
}

// apiError is the error member of an OpenAI error object.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    *string `json:"code"`
}

// parseAPIError returns the error object in b, or nil when b is not an
// OpenAI error object with a message.
func parseAPIError(b []byte) *apiError {
	var doc struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(b, &doc) != nil || doc.Error == nil || strings.TrimSpace(doc.Error.Message) == "" {
		return nil
	}
	return doc.Error
}

func (e *apiError) code() string {
	if e.Code != nil && *e.Code != "" {
		return *e.Code
	}
	if e.Type != "" {
		return e.Type
	}
	return "no-code"
}

func judgeErrorStatus(o outcome, status int, b []byte) outcome {
	e := parseAPIError(b)
	if e == nil {
		o.kind, o.detail = outcomeBad, fmt.Sprintf("status %d without an OpenAI error object: %q", status, clipBytes(b, 300))
		return o
	}
	o.kind, o.detail, o.message = outcomeClearError, fmt.Sprintf("http %d %s", status, e.code()), e.Message
	return o
}

// chaosChoice is a choice of an answer or a chunk, completions or chat.
type chaosChoice struct {
	Index        *int    `json:"index"`
	FinishReason *string `json:"finish_reason"`
}

// chaosDoc is an answer, a chunk, or an error event.
type chaosDoc struct {
	Choices []chaosChoice   `json:"choices"`
	Usage   *chaosUsage     `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// checkUsage checks an answer's usage against the request and its finish
// reasons: every token counted once, at most max_tokens per choice, and
// exactly max_tokens per choice when every choice ran to its length.
func (r *chaosRequest) checkUsage(u *chaosUsage, finishes []string) error {
	if u == nil {
		return errors.New("no usage")
	}
	if u.PromptTokens < 1 || u.CompletionTokens < 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		return fmt.Errorf("usage %+v: want prompt_tokens >= 1 and total = prompt + completion", *u)
	}
	if u.CompletionTokens > r.n*r.maxTokens {
		return fmt.Errorf("usage %+v: more completion tokens than n*max_tokens = %d", *u, r.n*r.maxTokens)
	}
	allLength := true
	for _, f := range finishes {
		allLength = allLength && f == "length"
	}
	if allLength && u.CompletionTokens != r.n*r.maxTokens {
		return fmt.Errorf("usage %+v: every choice finished by length, so want %d completion tokens", *u, r.n*r.maxTokens)
	}
	return nil
}

// finishOK reports whether f is a finish reason of a complete choice.
func finishOK(f string) bool { return f == "stop" || f == "length" }

func (r *chaosRequest) judgeWhole(o outcome, b []byte) outcome {
	bad := func(format string, args ...any) outcome {
		o.kind, o.detail = outcomeBad, fmt.Sprintf(format, args...)+fmt.Sprintf(" (answer %q)", clipBytes(b, 300))
		return o
	}
	var d chaosDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return bad("200 answer is not JSON: %v", err)
	}
	if len(d.Error) > 0 && string(d.Error) != "null" {
		return bad("200 answer carries an error")
	}
	if len(d.Choices) != r.n {
		return bad("200 answer has %d choices, want %d", len(d.Choices), r.n)
	}
	finishes := make([]string, r.n)
	for _, c := range d.Choices {
		if c.Index == nil || *c.Index < 0 || *c.Index >= r.n || finishes[*c.Index] != "" {
			return bad("choice index missing, out of range or repeated")
		}
		if c.FinishReason == nil || !finishOK(*c.FinishReason) {
			return bad("choice %d has no finish reason stop or length", *c.Index)
		}
		finishes[*c.Index] = *c.FinishReason
	}
	if err := r.checkUsage(d.Usage, finishes); err != nil {
		return bad("%v", err)
	}
	o.kind, o.usage = outcomeCompleted, *d.Usage
	return o
}

// judgeStream reads and judges a streamed 200 answer.
func (r *chaosRequest) judgeStream(o outcome, resp *http.Response, body io.Reader, cancel context.CancelCauseFunc,
	ended func(string, error) outcome) outcome {
	bad := func(format string, args ...any) outcome {
		o.kind, o.detail = outcomeBad, fmt.Sprintf(format, args...)
		return o
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return bad("streamed 200 answer has Content-Type %q", resp.Header.Get("Content-Type"))
	}
	// A read that fails (the client leaving, a cut connection) makes the
	// scanner hand back the partial last line as if it were whole; rb keeps
	// the error so that such a line is judged as the cut it is, not as an
	// event the server sent broken.
	rb := &readErr{r: body}
	sc := bufio.NewScanner(rb)
	sc.Buffer(make([]byte, 64<<10), answerBytesMax)
	var (
		events   int
		done     bool
		errEvent *apiError
		usage    *chaosUsage
		finishes = make([]string, r.n)
	)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // blank lines, comments, other fields
		}
		data = strings.TrimPrefix(data, " ")
		events++
		if done {
			return bad("event after [DONE]: %q", clip(data, 200))
		}
		if errEvent != nil {
			return bad("event after the error event: %q", clip(data, 200))
		}
		if data == "[DONE]" {
			done = true
		} else {
			var d chaosDoc
			if err := json.Unmarshal([]byte(data), &d); err != nil {
				if rb.err != nil && rb.err != io.EOF {
					return ended(fmt.Sprintf("read the stream after %d events (its last line cut)", events-1), rb.err)
				}
				return bad("event is not JSON: %v: %q", err, clip(data, 200))
			}
			if len(d.Error) > 0 && string(d.Error) != "null" {
				if errEvent = parseAPIError([]byte(data)); errEvent == nil {
					return bad("error event without an OpenAI error object with a message: %q", clip(data, 300))
				}
			}
			for _, c := range d.Choices {
				if c.Index == nil || *c.Index < 0 || *c.Index >= r.n {
					return bad("chunk choice index missing or out of range: %q", clip(data, 200))
				}
				if c.FinishReason != nil && *c.FinishReason != "" {
					if finishes[*c.Index] != "" {
						return bad("choice %d finished twice", *c.Index)
					}
					if !finishOK(*c.FinishReason) {
						return bad("choice %d finished with %q", *c.Index, *c.FinishReason)
					}
					finishes[*c.Index] = *c.FinishReason
				}
			}
			if d.Usage != nil {
				if usage != nil {
					return bad("two usage chunks")
				}
				usage = d.Usage
			}
		}
		if r.leave == leaveMidAnswer && events >= r.leaveAfter && !done && errEvent == nil {
			cancel(errLeave)
			if _, err := io.Copy(io.Discard, body); err == nil {
				// The rest had already arrived; the client still left before reading it.
				o.kind = outcomeDisconnected
				return o
			}
		}
	}
	if err := sc.Err(); err != nil {
		return ended(fmt.Sprintf("read the stream after %d events", events), err)
	}
	switch {
	case errEvent != nil:
		o.kind, o.detail, o.message = outcomeClearError, "sse error "+errEvent.code(), errEvent.Message
		return o
	case !done:
		return bad("stream ended after %d events without [DONE] or an error event (a silent truncated 200)", events)
	}
	for i, f := range finishes {
		if f == "" {
			return bad("stream ended with [DONE] but choice %d never finished", i)
		}
	}
	if err := r.checkUsage(usage, finishes); err != nil {
		return bad("%v", err)
	}
	o.kind, o.usage = outcomeCompleted, *usage
	return o
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func clipBytes(b []byte, n int) string { return clip(string(b), n) }

// readErr remembers the first error its reader returned.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}
