package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Call is one tool call the model made. Arguments is JSON text (an object,
// as the model wrote it), which OpenAI's API sends as a string.
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// CallDelta is a streamed piece of tool call Index (0, 1, ... in order of
// appearance): the first piece of a call has its ID and Name, later ones
// only more Arguments text. Concatenating a call's Arguments pieces gives
// Call.Arguments.
type CallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Delta is what a Parser decided after one piece of text: content to show
// and tool call pieces, in that order (content that precedes a call comes
// in an earlier Delta or before it in this one).
type Delta struct {
	Content string
	Calls   []CallDelta
}

// Empty reports whether d carries nothing.
func (d Delta) Empty() bool { return d.Content == "" && len(d.Calls) == 0 }

// Result is a whole output split into content and tool calls.
type Result struct {
	Content string
	Calls   []Call
}

// Parse splits a whole output as a Parser fed it in pieces would, with ids
// from f.NewID.
func Parse(f Format, text string) Result {
	p := NewParser(f, nil)
	var r Result
	r.add(p.Feed(text))
	r.add(p.Flush())
	return r
}

// add folds d into r.
func (r *Result) add(d Delta) {
	r.Content += d.Content
	for _, c := range d.Calls {
		if c.Index == len(r.Calls) {
			r.Calls = append(r.Calls, Call{ID: c.ID, Name: c.Name})
		}
		r.Calls[c.Index].Arguments += c.Arguments
	}
}

// Collect folds deltas into a Result, as a client joining streamed chunks
// does.
func Collect(ds ...Delta) Result {
	var r Result
	for _, d := range ds {
		r.add(d)
	}
	return r
}

// state is where a Parser is in the output.
type state int

const (
	stOutside  state = iota // content; looking for the format's opening marker
	stStart                 // Llama 3 / generic: nothing decided yet
	stMarker                // Mistral: after [TOOL_CALLS], array or name form not decided
	stHeader                // reading a call object's head: {"name": "...", "arguments":
	stArgs                  // inside the arguments object, streamed
	stTail                  // after the arguments: the rest of the call object
	stAfter                 // after a call: a closing tag or a separator
	stName                  // Mistral v11: the name, up to [ARGS]
	stNameArgs              // Mistral v11: after [ARGS], before the arguments
	stBuffer                // a call that does not parse incrementally, collected whole
	stPlain                 // everything is content from here on
)

// Bounds on what a call's head may hold, so that the decision to give up
// on one depends only on the text, never on how it was split.
const (
	maxHeadName = 256 // bytes of a function name in a call's head
	maxHeadWS   = 256 // bytes of one run of whitespace in a call's head
)

// Parser splits a stream of generated text into content and tool calls, in
// one Format. Feed it the text as it comes and Flush at the end; the
// concatenation of what it returns does not depend on how the text was
// split (at any byte). Text that could still be part of a call is held
// back until it is decided. Content whitespace next to calls is dropped:
// whitespace is held until non-space content follows, dropped when a call
// starts (and at the end, unless no call was made); whitespace right after
// a call is dropped.
// Not safe for concurrent use.
//
// A call whose head ({"name": "...", "arguments": {) reads in order is
// streamed: id and name as soon as the head is read, then the arguments
// text as it comes, exactly as written. Other calls (keys in another order,
// arguments as a string) are collected and parsed whole; a block that is
// not a call after all becomes content. A call cut short (max_tokens) keeps
// the arguments text it got.
type Parser struct {
	f     Format
	newID func() string
	st    state
	pend  string // text received and not yet decided
	out   Delta  // the Delta being built

	calls    int    // calls started
	ws       string // content whitespace held back
	sawCall  bool
	trimLead bool   // drop the whitespace that starts the next content (after a call)
	open     string // the marker that opened the current block ("" for bare JSON)
	inArray  bool   // the current call is an element of a JSON array
	outer    bool   // the arguments are inside a call object (not Mistral's name form)
	scan     scanner
	buf      string // stBuffer: the block so far
	name     string // stNameArgs: the function name
}

// NewParser returns a parser for format f. newID makes tool call ids; nil
// uses f.NewID.
func NewParser(f Format, newID func() string) *Parser {
	if newID == nil {
		newID = f.NewID
	}
	p := &Parser{f: f, newID: newID}
	if f == Llama3JSON || f == Generic {
		p.st = stStart
	}
	return p
}

// Feed takes the next piece of output and returns what it decides.
func (p *Parser) Feed(text string) Delta {
	p.pend += text
	p.run(false)
	return p.take()
}

// Calls returns how many tool calls the parser has started.
func (p *Parser) Calls() int { return p.calls }

// Flush ends the output and returns what was held back.
func (p *Parser) Flush() Delta {
	p.run(true)
	switch p.st {
	case stOutside, stPlain, stStart:
		p.content(p.pend)
	case stHeader, stBuffer:
		p.finishBuffer(p.buf+p.pend, false)
	case stName:
		p.content(p.open + p.pend)
	case stNameArgs:
		p.content(p.open + p.name + mistralArgs + p.pend)
	}
	p.pend = ""
	if !p.sawCall && p.ws != "" {
		p.out.Content += p.ws
	}
	p.ws = ""
	p.st = stPlain
	return p.take()
}

func (p *Parser) take() Delta {
	d := p.out
	p.out = Delta{}
	return d
}

// content adds content text, holding back trailing whitespace and dropping
// whitespace that follows a call.
func (p *Parser) content(s string) {
	if p.trimLead {
		s = trimWS(s)
		if s == "" {
			return
		}
		p.trimLead = false
	}
	if s == "" {
		return
	}
	t := strings.TrimRight(s, " \t\r\n")
	if t == "" {
		p.ws += s
		return
	}
	p.out.Content += p.ws + t
	p.ws = s[len(t):]
}

// startCall opens call p.calls with its name; held whitespace is dropped.
func (p *Parser) startCall(name string) {
	p.ws = ""
	p.sawCall, p.trimLead = true, true
	p.out.Calls = append(p.out.Calls, CallDelta{Index: p.calls, ID: p.newID(), Name: name})
	p.calls++
}

// args adds arguments text to the current call.
func (p *Parser) args(s string) {
	if s == "" {
		return
	}
	if n := len(p.out.Calls); n > 0 && p.out.Calls[n-1].Index == p.calls-1 {
		p.out.Calls[n-1].Arguments += s
		return
	}
	p.out.Calls = append(p.out.Calls, CallDelta{Index: p.calls - 1, Arguments: s})
}

// wholeCall adds a call parsed whole.
func (p *Parser) wholeCall(name, args string) {
	p.startCall(name)
	p.args(args)
}

// afterCall is the state after a call object or Mistral's name-form
// arguments.
func (p *Parser) afterCall() state {
	if p.f == Mistral && !p.inArray {
		return stOutside
	}
	return stAfter
}

// outside is where text after the calls goes: Llama 3 and generic output
// has calls only at its start.
func (p *Parser) outside() state {
	if p.f == Llama3JSON || p.f == Generic {
		return stPlain
	}
	return stOutside
}

// run advances through p.pend as far as it decides; final means no more
// text will come.
func (p *Parser) run(final bool) {
	for {
		progressed := p.step(final)
		if !progressed {
			return
		}
	}
}

// step does one move and reports whether it changed anything.
func (p *Parser) step(final bool) bool {
	switch p.st {
	case stPlain:
		p.content(p.pend)
		p.pend = ""
		return false

	case stOutside:
		marker := hermesOpen
		if p.f == Mistral {
			marker = mistralCall
		}
		if i := strings.Index(p.pend, marker); i >= 0 {
			p.content(p.pend[:i])
			p.pend = p.pend[i+len(marker):]
			p.open = marker
			p.inArray = false
			if p.f == Mistral {
				p.st = stMarker
			} else {
				p.st, p.outer = stHeader, true
			}
			return true
		}
		keep := prefixSuffix(p.pend, marker)
		p.content(p.pend[:len(p.pend)-keep])
		p.pend = p.pend[len(p.pend)-keep:]
		return false

	case stStart:
		s := trimWS(p.pend)
		switch {
		case s == "":
			return false
		case strings.HasPrefix(s, pythonTag):
			p.pend = s[len(pythonTag):]
			p.open, p.st, p.outer = pythonTag, stHeader, true
			return true
		case strings.HasPrefix(pythonTag, s):
			return false
		case s[0] == '{':
			p.open, p.st, p.outer = "", stHeader, true
			return true
		case s[0] == '[' && p.f == Generic:
			p.pend = s[1:]
			p.open, p.st, p.outer, p.inArray = "[", stHeader, true, true
			return true
		}
		p.st = stPlain
		return true

	case stMarker:
		s := trimWS(p.pend)
		if s == "" {
			return false
		}
		if s[0] == '[' {
			p.pend = s[1:]
			p.open += "["
			p.st, p.outer, p.inArray = stHeader, true, true
			return true
		}
		p.st = stName
		return true

	case stHeader:
		name, n, m := matchHead(p.pend)
		switch m {
		case matchMore:
			return false
		case matchFail:
			p.st, p.buf = stBuffer, ""
			return true
		}
		p.startCall(name)
		p.pend = p.pend[n:]
		p.scan = scanner{}
		p.st = stArgs
		return true

	case stArgs:
		if p.pend == "" {
			return false
		}
		for i := 0; i < len(p.pend); i++ {
			if p.scan.step(p.pend[i]) {
				p.args(p.pend[:i+1])
				p.pend = p.pend[i+1:]
				if p.outer {
					p.scan = scanner{depth: 1}
					p.st = stTail
				} else {
					p.st = p.afterCall()
				}
				return true
			}
		}
		p.args(p.pend)
		p.pend = ""
		return false

	case stTail:
		for i := 0; i < len(p.pend); i++ {
			if p.scan.step(p.pend[i]) {
				p.pend = p.pend[i+1:]
				p.st = p.afterCall()
				return true
			}
		}
		p.pend = ""
		return false

	case stAfter:
		return p.stepAfter()

	case stName:
		i := strings.Index(p.pend, mistralArgs)
		if i < 0 || i > maxHeadName {
			if i > maxHeadName || len(p.pend) >= maxHeadName+len(mistralArgs) {
				p.content(p.open)
				p.st = stOutside
				return true
			}
			return false
		}
		name := p.pend[:i]
		if j := strings.Index(name, mistralID); j >= 0 {
			name = name[:j]
		}
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, "{}[]\"\n") {
			p.content(p.open)
			p.st = stOutside
			return true
		}
		p.name = p.pend[:i]
		p.pend = p.pend[i+len(mistralArgs):]
		p.st = stNameArgs
		return true

	case stNameArgs:
		s := trimWS(p.pend)
		if s == "" {
			return false
		}
		if s[0] != '{' {
			p.content(p.open + p.name + mistralArgs)
			p.st = stOutside
			return true
		}
		name := p.name
		if j := strings.Index(name, mistralID); j >= 0 {
			name = name[:j]
		}
		p.startCall(strings.TrimSpace(name))
		p.pend = s
		p.scan = scanner{}
		p.st, p.outer = stArgs, false
		return true

	case stBuffer:
		if p.f == Hermes {
			if i := strings.Index(p.pend, hermesClose); i >= 0 {
				p.finishBuffer(p.buf+p.pend[:i], true)
				p.pend = p.pend[i+len(hermesClose):]
				p.buf = ""
				p.st = stOutside
				return true
			}
			keep := prefixSuffix(p.pend, hermesClose)
			p.buf += p.pend[:len(p.pend)-keep]
			p.pend = p.pend[len(p.pend)-keep:]
			return false
		}
		p.buf += p.pend
		p.pend = ""
		return false
	}
	return false
}

// stepAfter handles the text after a call: Hermes's closing tag, a ";"
// between Llama 3 calls, "," or "]" in an array.
func (p *Parser) stepAfter() bool {
	s := trimWS(p.pend)
	if s == "" {
		return false
	}
	p.pend = s
	switch {
	case p.inArray && s[0] == ',':
		p.pend, p.st, p.open = s[1:], stHeader, ""
		return true
	case p.inArray && s[0] == ']':
		p.pend, p.inArray = s[1:], false
		p.st = p.outside()
		return true
	case p.inArray:
		p.inArray = false
		p.st = p.outside()
		return true
	case p.f == Hermes && strings.HasPrefix(s, hermesClose):
		p.pend, p.st = s[len(hermesClose):], stOutside
		return true
	case p.f == Hermes && strings.HasPrefix(hermesClose, s):
		return false
	case p.f == Llama3JSON && s[0] == ';':
		p.pend, p.st, p.open = s[1:], stHeader, ""
		return true
	}
	p.st = p.outside()
	return true
}

// finishBuffer ends a block collected whole: its calls, or, when it is not
// a call, its text as content (with the markers around it). closed says
// whether Hermes's closing tag ended it.
func (p *Parser) finishBuffer(text string, closed bool) {
	if calls, ok := parseCalls(text); ok {
		for _, c := range calls {
			p.wholeCall(c.Name, c.Arguments)
		}
		return
	}
	s := p.open + text
	if closed {
		s += hermesClose
	}
	p.inArray = false
	p.content(s)
}

// parseCalls reads text collected whole as one call object, an array of
// them, or call objects separated by ";" (Llama 3). A trailing "]" (an
// array whose "[" was consumed before) is allowed.
func parseCalls(text string) ([]Call, bool) {
	t := strings.TrimSpace(text)
	for _, cand := range []string{t, "[" + t, strings.TrimSuffix(t, "]")} {
		if calls, ok := parseCallsJSON(cand); ok {
			return calls, true
		}
	}
	if strings.Contains(t, ";") {
		var calls []Call
		for part := range strings.SplitSeq(t, ";") {
			c, ok := parseCallObject([]byte(part))
			if !ok {
				return nil, false
			}
			calls = append(calls, c)
		}
		return calls, true
	}
	return nil, false
}

func parseCallsJSON(t string) ([]Call, bool) {
	b := []byte(t)
	if !json.Valid(b) {
		return nil, false
	}
	if len(b) > 0 && b[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(b, &items) != nil || len(items) == 0 {
			return nil, false
		}
		calls := make([]Call, 0, len(items))
		for _, it := range items {
			c, ok := parseCallObject(it)
			if !ok {
				return nil, false
			}
			calls = append(calls, c)
		}
		return calls, true
	}
	c, ok := parseCallObject(b)
	if !ok {
		return nil, false
	}
	return []Call{c}, true
}

// parseCallObject reads {"name": N, "arguments"|"parameters": A}: A an
// object, or a string holding one (kept as its text), or absent ("{}").
func parseCallObject(b []byte) (Call, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return Call{}, false
	}
	var c Call
	if r, ok := obj["name"]; !ok || json.Unmarshal(r, &c.Name) != nil || c.Name == "" {
		return Call{}, false
	}
	args, ok := obj["arguments"]
	if !ok {
		args, ok = obj["parameters"]
	}
	args = bytes.TrimSpace(args)
	switch {
	case !ok || isNull(args):
		c.Arguments = "{}"
	case args[0] == '{':
		c.Arguments = string(args)
	case args[0] == '"':
		var s string
		if json.Unmarshal(args, &s) != nil {
			return Call{}, false
		}
		c.Arguments = s
	default:
		return Call{}, false
	}
	return c, true
}

// matchStatus is the outcome of matchHead.
type matchStatus int

const (
	matchOK   matchStatus = iota // a head
	matchMore                    // a prefix of a head: need more text
	matchFail                    // no continuation makes it a head
)

// matchHead reads a call object's head at the start of s:
//
//	ws { ws "name" ws : ws STRING ws , ws ("arguments"|"parameters") ws : ws
//
// followed by the "{" of the arguments. It returns the name and the offset
// of that "{". The outcome depends only on s: matchMore only if some
// continuation of s is a head.
func matchHead(s string) (string, int, matchStatus) {
	h := head{s: s}
	h.ws()
	h.lit("{")
	h.ws()
	h.lit(`"name"`)
	h.ws()
	h.lit(":")
	h.ws()
	raw := h.str()
	h.ws()
	h.lit(",")
	h.ws()
	h.lit(`"arguments"`, `"parameters"`)
	h.ws()
	h.lit(":")
	h.ws()
	if h.st != matchOK {
		return "", 0, h.st
	}
	if h.i == len(s) {
		return "", 0, matchMore
	}
	if s[h.i] != '{' {
		return "", 0, matchFail
	}
	var name string
	if json.Unmarshal([]byte(raw), &name) != nil || name == "" {
		return "", 0, matchFail
	}
	return name, h.i, matchOK
}

// head is matchHead's cursor: st becomes matchMore or matchFail at the
// first step that cannot be done, and later steps do nothing.
type head struct {
	s  string
	i  int
	st matchStatus
}

func (h *head) ws() {
	if h.st != matchOK {
		return
	}
	n := 0
	for h.i < len(h.s) && isWS(h.s[h.i]) {
		h.i++
		n++
	}
	if n > maxHeadWS {
		h.st = matchFail
	}
}

// lit reads one of alts.
func (h *head) lit(alts ...string) {
	if h.st != matchOK {
		return
	}
	rest := h.s[h.i:]
	more := false
	for _, a := range alts {
		if strings.HasPrefix(rest, a) {
			h.i += len(a)
			return
		}
		if strings.HasPrefix(a, rest) {
			more = true
		}
	}
	if more {
		h.st = matchMore
	} else {
		h.st = matchFail
	}
}

// str reads a JSON string (at most maxHeadName bytes) and returns it
// quoted.
func (h *head) str() string {
	if h.st != matchOK {
		return ""
	}
	if h.i == len(h.s) {
		h.st = matchMore
		return ""
	}
	if h.s[h.i] != '"' {
		h.st = matchFail
		return ""
	}
	start := h.i
	for j := h.i + 1; j < len(h.s); j++ {
		if j-start > maxHeadName+1 {
			h.st = matchFail
			return ""
		}
		switch c := h.s[j]; {
		case c == '\\':
			j++
		case c == '"':
			h.i = j + 1
			return h.s[start:h.i]
		case c < 0x20:
			h.st = matchFail
			return ""
		}
	}
	if len(h.s)-start > maxHeadName+1 {
		h.st = matchFail
	} else {
		h.st = matchMore
	}
	return ""
}

// scanner follows a JSON value's nesting: strings (with escapes), objects
// and arrays.
type scanner struct {
	depth     int
	inStr, bs bool
}

// step takes one byte and reports whether it closed the value (the depth
// came back to 0).
func (sc *scanner) step(b byte) bool {
	if sc.inStr {
		switch {
		case sc.bs:
			sc.bs = false
		case b == '\\':
			sc.bs = true
		case b == '"':
			sc.inStr = false
		}
		return false
	}
	switch b {
	case '"':
		sc.inStr = true
	case '{', '[':
		sc.depth++
	case '}', ']':
		sc.depth--
		return sc.depth <= 0
	}
	return false
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trimWS(s string) string { return strings.TrimLeft(s, " \t\r\n") }

// prefixSuffix returns the length of the longest suffix of s that is a
// proper prefix of marker.
func prefixSuffix(s, marker string) int {
	for k := min(len(marker)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, marker[:k]) {
			return k
		}
	}
	return 0
}
