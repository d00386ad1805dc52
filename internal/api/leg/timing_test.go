package leg

import (
	"strings"
	"testing"
	"time"
)

func dur(d time.Duration) *time.Duration { return &d }

// TestTimingRoundTrip: String and ParseTiming agree, to the microsecond;
// unset fields are left out.
func TestTimingRoundTrip(t *testing.T) {
	in := Timing{Queue: dur(1500 * time.Microsecond), Prefill: dur(2 * time.Second), Transfer: dur(0)}
	s := in.String()
	if s != "queue_ms=1.500, prefill_ms=2000.000, transfer_ms=0.000" {
		t.Errorf("String = %q", s)
	}
	out, err := ParseTiming(s)
	if err != nil || out.Queue == nil || *out.Queue != *in.Queue || *out.Prefill != *in.Prefill || *out.Transfer != 0 || out.FirstDecode != nil {
		t.Errorf("ParseTiming(%q) = %+v, %v", s, out, err)
	}
	if got := (Timing{}).String(); got != "" {
		t.Errorf("empty Timing renders %q, want \"\"", got)
	}
}

// TestTimingFromComment: the comment event a stream carries its timing in
// is recognised (with or without the space after the colon, LF or CRLF);
// other comments and data events are not.
func TestTimingFromComment(t *testing.T) {
	for raw, want := range map[string]string{
		": x-tandem-timing first_decode_ms=0.250\n\n": "first_decode_ms=0.250",
		":x-tandem-timing queue_ms=1\r\n\r\n":         "queue_ms=1",
		": keep-alive\n\n":                            "",
		"data: x-tandem-timing queue_ms=1\n\n":        "",
		": x-tandem-timing a=1\n: second line\n\n":    "",
	} {
		got, ok := TimingFromComment([]byte(raw))
		if got != want || ok != (want != "") {
			t.Errorf("TimingFromComment(%q) = %q, %v; want %q", raw, got, ok, want)
		}
	}
}

// TestParseTimingRefuses: malformed values are errors, unknown names are
// skipped.
func TestParseTimingRefuses(t *testing.T) {
	for _, v := range []string{"queue_ms", "queue_ms=x", "queue_ms=-1", "queue_ms=NaN", "queue_ms=Inf", strings.Repeat("a=1,", 100)} {
		if _, err := ParseTiming(v); err == nil {
			t.Errorf("ParseTiming(%q) accepted it", v)
		}
	}
	tm, err := ParseTiming("future_ms=3, first_decode_ms=0.25")
	if err != nil || tm.FirstDecode == nil || *tm.FirstDecode != 250*time.Microsecond || tm.Queue != nil {
		t.Errorf("ParseTiming with an unknown name = %+v, %v", tm, err)
	}
}

// TestTimingTokens: a decode worker's token counts and finish reason
// round-trip; a negative count or a finish reason that is not a word is
// refused.
func TestTimingTokens(t *testing.T) {
	p, o := 12, 34
	in := Timing{FirstDecode: dur(time.Millisecond), PromptTokens: &p, OutputTokens: &o, Finish: "length"}
	s := in.String()
	if s != "first_decode_ms=1.000, prompt_tokens=12, output_tokens=34, finish=length" {
		t.Errorf("String = %q", s)
	}
	out, err := ParseTiming(s)
	if err != nil || out.PromptTokens == nil || *out.PromptTokens != 12 || out.OutputTokens == nil || *out.OutputTokens != 34 || out.Finish != "length" {
		t.Errorf("ParseTiming(%q) = %+v, %v", s, out, err)
	}
	for _, bad := range []string{"prompt_tokens=-1", "output_tokens=1.5", "finish=a b", "finish=" + strings.Repeat("x", 40)} {
		if _, err := ParseTiming(bad); err == nil {
			t.Errorf("ParseTiming(%q) accepted", bad)
		}
	}
}
