package leg

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HeaderTiming carries a worker's timings of its part of a leg, so that the
// router, which alone sees both legs, can split a disaggregated request's
// time to first token into phases. A worker sends it as a header of a
// whole (non-streamed) answer, such as a prefill leg's; a streamed answer,
// such as a decode leg's, carries the same value in an SSE comment event
// just before data: [DONE] (": " + TimingComment + value), since its
// headers go out before the first token. An HTTP trailer would be lost
// when the client closes its connection right after [DONE], which ends the
// router's read of the leg. The router reads both and passes neither to
// the client. The value is Timing.String's: "name=milliseconds" pairs
// separated by ", ", each a duration on the worker's own clock (no clock
// needs to agree with another).
const HeaderTiming = "X-Tandem-Timing"

// TimingComment starts the SSE comment that carries HeaderTiming's value
// in a stream.
const TimingComment = "x-tandem-timing "

// TimingFromComment returns the value of a timing comment event (its raw
// text: ": x-tandem-timing VALUE" and line ends), and whether raw is one.
func TimingFromComment(raw []byte) (string, bool) {
	s := strings.TrimRight(string(raw), "\r\n")
	s, ok := strings.CutPrefix(s, ":")
	if !ok || strings.ContainsAny(s, "\r\n") {
		return "", false
	}
	v, ok := strings.CutPrefix(strings.TrimPrefix(s, " "), TimingComment)
	if !ok {
		return "", false
	}
	return v, true
}

// Timing is what HeaderTiming says; a nil field was not reported.
type Timing struct {
	// Prefill worker: queue is the leg's arrival to its prompt's admission
	// into the engine (waiting for decode's allocation, then for the
	// engine); prefill is admission to the first token; transfer is the
	// first token to decode's acknowledgement of the whole KV.
	Queue, Prefill, Transfer *time.Duration
	// Decode worker: first_decode is resuming from the imported KV to the
	// first token leaving the worker.
	FirstDecode *time.Duration
	// Decode worker (and a local leg's): the prompt's tokens, the tokens
	// generated and the finish reason, for the router's per-request log
	// line and span (prompt_tokens, output_tokens: integers; finish: a
	// word of at most finishMax letters, digits or underscores).
	PromptTokens, OutputTokens *int
	Finish                     string
}

// finishMax bounds a Timing's finish reason.
const finishMax = 32

// timingFields are the names of HeaderTiming's pairs, in order.
var timingFields = [...]string{"queue_ms", "prefill_ms", "transfer_ms", "first_decode_ms"}

func (t *Timing) fields() [4]**time.Duration {
	return [4]**time.Duration{&t.Queue, &t.Prefill, &t.Transfer, &t.FirstDecode}
}

// String renders the reported fields ("" when none is).
func (t Timing) String() string {
	var parts []string
	for i, f := range t.fields() {
		if *f != nil {
			parts = append(parts, timingFields[i]+"="+strconv.FormatFloat(float64(**f)/float64(time.Millisecond), 'f', 3, 64))
		}
	}
	for _, c := range [...]struct {
		name string
		n    *int
	}{{"prompt_tokens", t.PromptTokens}, {"output_tokens", t.OutputTokens}} {
		if c.n != nil {
			parts = append(parts, c.name+"="+strconv.Itoa(*c.n))
		}
	}
	if t.Finish != "" && validFinish(t.Finish) {
		parts = append(parts, "finish="+t.Finish)
	}
	return strings.Join(parts, ", ")
}

// validFinish reports whether s is a finish reason a Timing carries.
func validFinish(s string) bool {
	if len(s) == 0 || len(s) > finishMax {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// timingValueMax bounds a HeaderTiming value ParseTiming reads.
const timingValueMax = 256

// ParseTiming reads a HeaderTiming value. Unknown names are skipped (a
// newer worker may report more); a malformed pair, a negative or
// non-finite duration, or an over-long value is an error.
func ParseTiming(v string) (Timing, error) {
	var t Timing
	if len(v) > timingValueMax {
		return Timing{}, fmt.Errorf("leg: %s is %d bytes, over %d", HeaderTiming, len(v), timingValueMax)
	}
	if strings.TrimSpace(v) == "" {
		return t, nil
	}
	fs := t.fields()
	for _, p := range strings.Split(v, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return Timing{}, fmt.Errorf("leg: %s pair %q is not name=milliseconds", HeaderTiming, p)
		}
		switch name {
		case "prompt_tokens", "output_tokens":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return Timing{}, fmt.Errorf("leg: %s: %s=%q is not a count", HeaderTiming, name, val)
			}
			if name == "prompt_tokens" {
				t.PromptTokens = &n
			} else {
				t.OutputTokens = &n
			}
			continue
		case "finish":
			if !validFinish(val) {
				return Timing{}, fmt.Errorf("leg: %s: finish=%q is not a finish reason", HeaderTiming, val)
			}
			t.Finish = val
			continue
		}
		ms, err := strconv.ParseFloat(val, 64)
		if err != nil || !(ms >= 0 && ms <= 1e12) { // NaN fails both
			return Timing{}, fmt.Errorf("leg: %s: %s=%q is not a duration in milliseconds", HeaderTiming, name, val)
		}
		for i, n := range timingFields {
			if n == name {
				d := time.Duration(ms * float64(time.Millisecond))
				*fs[i] = &d
			}
		}
	}
	return t, nil
}
