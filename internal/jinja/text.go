package jinja

import "strings"

// Provenance. A string value carries the byte ranges of its text that came
// from untrusted input (UntrustedStr, FromJSON with untrusted set). The
// ranges follow the bytes through concatenation, slicing, joins, strip,
// replace, case changes, formatting and captured blocks; where an
// operation cannot say which output bytes came from which input (a repr
// of a list, tojson, sorting), the whole result is untrusted as soon as
// any input was: the mistakes go towards untrusted, never the other way.

// Span is a byte range [Start, End) of a text.
type Span struct{ Start, End int }

// taint is the untrusted ranges of one string value: sorted, disjoint and
// not touching. all: the whole string (spans unused).
type taint struct {
	all   bool
	spans []Span
}

// taintAll marks a whole string untrusted; it is never modified.
var taintAll = &taint{all: true}

// spansOf returns the untrusted ranges of a string value.
func spansOf(v Value) []Span {
	t := v.taint()
	switch {
	case t == nil:
		return nil
	case t.all:
		return []Span{{0, len(v.s)}}
	}
	return t.spans
}

// tainted reports whether any byte of the string v is untrusted.
func tainted(v Value) bool { return v.kind == KindString && v.ref != nil }

// textBuf builds a string and its untrusted ranges.
type textBuf struct {
	b     strings.Builder
	spans []Span
}

func (t *textBuf) len() int { return t.b.Len() }

func (t *textBuf) grow(n int) { t.b.Grow(n) }

// mark records [start, end) as untrusted, merging with the last range.
func (t *textBuf) mark(start, end int) {
	if start >= end {
		return
	}
	if n := len(t.spans); n > 0 && t.spans[n-1].End >= start {
		t.spans[n-1].End = max(t.spans[n-1].End, end)
		return
	}
	t.spans = append(t.spans, Span{start, end})
}

func (t *textBuf) writeTrusted(s string) { t.b.WriteString(s) }

func (t *textBuf) writeUntrusted(s string) {
	start := t.b.Len()
	t.b.WriteString(s)
	t.mark(start, t.b.Len())
}

// write appends a string value with its ranges.
func (t *textBuf) write(v Value) {
	start := t.b.Len()
	t.b.WriteString(v.s)
	tt := v.taint()
	switch {
	case tt == nil:
	case tt.all:
		t.mark(start, t.b.Len())
	default:
		for _, sp := range tt.spans {
			t.mark(start+sp.Start, start+sp.End)
		}
	}
}

// writeAs appends s, untrusted when untrusted is set.
func (t *textBuf) writeAs(s string, untrusted bool) {
	if untrusted {
		t.writeUntrusted(s)
	} else {
		t.writeTrusted(s)
	}
}

// value returns the text built so far as a string value.
func (t *textBuf) value() Value {
	v := Value{kind: KindString, s: t.b.String()}
	v.ref = makeTaint(t.spans, len(v.s))
	return v
}

// makeTaint returns the taint for spans over a text of n bytes (spans is
// not copied).
func makeTaint(spans []Span, n int) any {
	switch {
	case len(spans) == 0 || n == 0:
		return nil
	case len(spans) == 1 && spans[0].Start == 0 && spans[0].End >= n:
		return taintAll
	}
	return &taint{spans: spans}
}

// substr returns v.s[i:j] with its ranges (a string keeps its Markup flag).
func substr(v Value, i, j int) Value {
	out := Value{kind: KindString, s: v.s[i:j], flag: v.flag & flagSafe}
	tt := v.taint()
	switch {
	case tt == nil || i >= j:
	case tt.all:
		out.ref = taintAll
	default:
		var spans []Span
		for _, sp := range tt.spans {
			a, b := max(sp.Start, i), min(sp.End, j)
			if a < b {
				spans = append(spans, Span{a - i, b - i})
			}
		}
		out.ref = makeTaint(spans, j-i)
	}
	return out
}

// segments splits text into its trusted and untrusted pieces, given its
// untrusted ranges.
func segments(text string, spans []Span) []Segment {
	var out []Segment
	at := 0
	for _, sp := range spans {
		if sp.Start > at {
			out = append(out, Segment{Text: text[at:sp.Start]})
		}
		out = append(out, Segment{Text: text[sp.Start:sp.End], Untrusted: true})
		at = sp.End
	}
	if at < len(text) {
		out = append(out, Segment{Text: text[at:]})
	}
	return out
}

// mapRuns applies f to each trusted and untrusted piece of v apart, so
// that the result keeps the provenance of each piece (case changes,
// escaping).
func mapRuns(v Value, f func(string) string) Value {
	if v.ref == nil {
		return Value{kind: KindString, s: f(v.s), flag: v.flag}
	}
	var t textBuf
	for _, seg := range segments(v.s, spansOf(v)) {
		t.writeAs(f(seg.Text), seg.Untrusted)
	}
	out := t.value()
	out.flag = v.flag
	return out
}

// untrustedIf returns s, marked untrusted when untrusted is set.
func untrustedIf(s string, untrusted bool) Value {
	if untrusted {
		return UntrustedStr(s)
	}
	return Str(s)
}

// htmlEscape is markupsafe's escape.
func htmlEscape(s string) string {
	if !strings.ContainsAny(s, "&<>'\"") {
		return s
	}
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;", "\"", "&#34;")
	return r.Replace(s)
}
