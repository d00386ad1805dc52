package server

import (
	"strings"
	"unicode/utf8"

	"tandem/internal/engine"
	"tandem/internal/engine/tokenizer"
)

// tokenRec is one generated token with where its text landed in the
// choice's output: bytes [start, end) and the rune offset of start. A token
// whose bytes complete a character only with a later token has start == end.
type tokenRec struct {
	engine.Token
	start, end int
	runeStart  int
}

// choiceState follows one generated sequence: it detokenizes, looks for
// stop strings and decides which text may be sent. It has no goroutines and
// does no I/O.
//
// Invariants: text[:released] has been handed out; no stop string starts
// before released; released <= safe <= len(text); text[released:safe] cannot
// be the start of a stop string and may be handed out; every handed-out
// string is valid UTF-8 (the decoder emits whole characters and stop strings
// are valid UTF-8, so cuts fall on character boundaries).
type choiceState struct {
	dec      *tokenizer.Decoder
	stops    []string
	maxStop  int
	text     []byte
	runes    int // runes in text
	released int
	safe     int
	pending  []tokenRec       // tokens not yet handed out, in order
	tokens   int              // completion tokens consumed
	stopped  bool             // a stop string matched at safe
	keep     map[int32]string // control tokens decoded as this text instead of nothing
	ended    bool             // no more text will come
}

func newChoiceState(dec *tokenizer.Decoder, stops []string) *choiceState {
	c := &choiceState{dec: dec, stops: stops}
	for _, s := range stops {
		c.maxStop = max(c.maxStop, len(s))
	}
	return c
}

// add feeds one generated token and reports whether a stop string matched,
// after which the choice takes no more tokens.
func (c *choiceState) add(t engine.Token) bool {
	if c.stopped || c.ended {
		return c.stopped
	}
	start, runeStart := len(c.text), c.runes
	c.appendText(c.dec.Add(t.ID) + c.keep[t.ID])
	c.pending = append(c.pending, tokenRec{Token: t, start: start, end: len(c.text), runeStart: runeStart})
	c.tokens++
	c.scan()
	return c.stopped
}

// end marks the sequence finished: the decoder's held bytes are flushed
// into the last token and everything that is not cut by a stop string
// becomes safe.
func (c *choiceState) end() {
	if c.stopped || c.ended {
		return
	}
	c.ended = true
	if rest := c.dec.Flush(); rest != "" {
		c.appendText(rest)
		if n := len(c.pending); n > 0 {
			c.pending[n-1].end = len(c.text)
		}
	}
	c.scan()
}

func (c *choiceState) appendText(s string) {
	c.text = append(c.text, s...)
	c.runes += utf8.RuneCountInString(s)
}

// scan finds the earliest stop string at or after released; failing that,
// it holds back the earliest tail that is a proper prefix of a stop string
// (unless the sequence has ended).
func (c *choiceState) scan() {
	if len(c.stops) == 0 {
		c.safe = len(c.text)
		return
	}
	// A match must start at or after released, and no earlier than
	// maxStop-1 bytes before the previous end of text; searching from
	// released is simple and the held-back tail is short.
	tail := string(c.text[c.released:])
	cut := -1
	for _, s := range c.stops {
		if i := strings.Index(tail, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		c.safe, c.stopped = c.released+cut, true
		return
	}
	c.safe = len(c.text)
	if c.ended {
		return
	}
	for i := max(c.released, len(c.text)-c.maxStop+1); i < len(c.text); i++ {
		rest := string(c.text[i:])
		for _, s := range c.stops {
			if strings.HasPrefix(s, rest) {
				c.safe = i
				return
			}
		}
	}
}

// ready reports whether take would hand out text.
func (c *choiceState) ready() bool { return c.safe > c.released }

// take hands out the safe text and the tokens it completes. Once the choice
// has stopped or ended it hands out every remaining token whose text starts
// before the cut (tokens of the stop string itself are dropped).
func (c *choiceState) take() (string, []tokenRec) {
	text := string(c.text[c.released:c.safe])
	c.released = c.safe
	var n int
	switch {
	case c.stopped:
		for n < len(c.pending) && c.pending[n].start < c.safe {
			n++
		}
		c.pending = c.pending[:n]
		n = len(c.pending)
	case c.ended:
		n = len(c.pending)
	default:
		for n < len(c.pending) && c.pending[n].end <= c.released {
			n++
		}
	}
	toks := c.pending[:n:n]
	c.pending = c.pending[n:]
	return text, toks
}
