package tokenizer

import (
	"bytes"
	"unicode/utf8"
)

// llama.cpp's clean_up_tokenization_spaces runs three passes over the
// decoded bytes:
//  1. a space before '?', '!', '.' or ',' is removed;
//  2. " ' " becomes "'" (left to right, matches do not overlap);
//  3. the space is removed from " 's", " 'm", " 're" and " 've".
// Each pass is a local rewrite, so each is written here as a stream stage
// that holds back only the bytes a later byte could still change; Decode
// runs the stages over the whole text at once, Decoder chunk by chunk.

// cleanStage is one pass of the clean-up as a stream transform.
type cleanStage interface {
	// feed appends the transformed, final part of held+in to dst and keeps
	// the rest; with final, nothing is held back.
	feed(dst, in []byte, final bool) []byte
}

// cleanPunct is pass 1.
type cleanPunct struct{ held []byte }

func (c *cleanPunct) feed(dst, in []byte, final bool) []byte {
	buf := append(c.held, in...)
	c.held = c.held[:0]
	end := len(buf)
	if !final && end > 0 && buf[end-1] == ' ' {
		end-- // the next byte decides
	}
	for i := 0; i < end; i++ {
		if buf[i] == ' ' && i+1 < len(buf) {
			switch buf[i+1] {
			case '?', '!', '.', ',':
				continue
			}
		}
		dst = append(dst, buf[i])
	}
	c.held = append(c.held, buf[end:]...)
	return dst
}

// cleanQuote is pass 2.
type cleanQuote struct{ held []byte }

func (c *cleanQuote) feed(dst, in []byte, final bool) []byte {
	buf := append(c.held, in...)
	c.held = c.held[:0]
	i := 0
	for {
		j := bytes.Index(buf[i:], []byte(" ' "))
		if j < 0 {
			break
		}
		dst = append(dst, buf[i:i+j]...)
		dst = append(dst, '\'')
		i += j + 3
	}
	end := len(buf)
	if !final {
		// hold a tail that could start a match: " '" or " "
		switch tail := buf[i:]; {
		case bytes.HasSuffix(tail, []byte(" '")):
			end -= 2
		case bytes.HasSuffix(tail, []byte(" ")):
			end--
		}
	}
	dst = append(dst, buf[i:end]...)
	c.held = append(c.held, buf[end:]...)
	return dst
}

// cleanContraction is pass 3.
type cleanContraction struct{ held []byte }

func (c *cleanContraction) feed(dst, in []byte, final bool) []byte {
	buf := append(c.held, in...)
	c.held = c.held[:0]
	end := len(buf)
	if !final {
		// hold the longest tail that is a proper prefix of " 're"/" 've"/
		// " 's"/" 'm": " 'r", " 'v", " '" or " "
		for k := 3; k >= 1; k-- {
			if k > len(buf) {
				continue
			}
			tail := buf[len(buf)-k:]
			if tail[0] != ' ' || (k >= 2 && tail[1] != '\'') || (k == 3 && tail[2] != 'r' && tail[2] != 'v') {
				continue
			}
			end = len(buf) - k
			break
		}
	}
	for i := 0; i < end; i++ {
		if buf[i] == ' ' && i+2 < len(buf) && buf[i+1] == '\'' {
			x := buf[i+2]
			if x == 's' || x == 'm' {
				continue
			}
			if i+3 < len(buf) && (x == 'r' || x == 'v') && buf[i+3] == 'e' {
				continue
			}
		}
		dst = append(dst, buf[i])
	}
	c.held = append(c.held, buf[end:]...)
	return dst
}

// cleanSpaces applies llama.cpp's clean_up_tokenization_spaces to a whole
// text.
func cleanSpaces(b []byte) []byte {
	b = (&cleanPunct{}).feed(nil, b, true)
	b = (&cleanQuote{}).feed(nil, b, true)
	return (&cleanContraction{}).feed(nil, b, true)
}

// appendValidUTF8 appends b to dst with every byte that does not start a
// valid UTF-8 sequence replaced by U+FFFD (one per byte, as ranging over a
// Go string does).
func appendValidUTF8(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return dst
}

// Decoder turns the token ids of one sequence into text as they arrive.
// Every string it returns is valid UTF-8 and ends on a character boundary:
// bytes of a character split across tokens (SPM byte fallback, BPE byte
// tokens) wait for the rest, and bytes that cannot form a character come
// out as U+FFFD. Feeding all ids of a sequence and then calling Flush gives
// Decode's text with invalid bytes replaced that way. A Decoder is not safe
// for concurrent use.
type Decoder struct {
	t      *Tokenizer
	n      int  // ids added so far
	strip  int  // index whose leading space is dropped, -1 for none
	decide bool // strip is decided on the first id
	stages []cleanStage
	pend   []byte // cleaned bytes not yet returned (an incomplete character)
	in     []byte // scratch copy of the current piece
	tmp    [2][]byte
}

// NewDecoder returns a decoder for a sequence fed from its first token: its
// output matches Decode, including the removal of the SPM leading space and
// the BPE space clean-up.
func (t *Tokenizer) NewDecoder() *Decoder {
	d := &Decoder{t: t, strip: -1, decide: t.v.AddSpacePrefix}
	if t.cleanSpaces {
		d.stages = []cleanStage{&cleanPunct{}, &cleanQuote{}, &cleanContraction{}}
	}
	return d
}

// NewContinuationDecoder returns a decoder for tokens that continue text
// produced elsewhere, such as generated tokens after a prompt: each token
// contributes exactly its TokenPiece (no leading-space removal, no space
// clean-up), which is what llama.cpp's server streams.
func (t *Tokenizer) NewContinuationDecoder() *Decoder {
	return &Decoder{t: t, strip: -1}
}

// Add feeds one token id and returns the text it completes, possibly "".
func (d *Decoder) Add(id int32) string {
	if d.n == 0 && d.decide {
		d.strip = d.t.stripIndex(id)
	}
	p := d.t.piece(id)
	if d.n == d.strip && p != "" && p[0] == ' ' {
		p = p[1:]
	}
	d.n++
	if len(d.stages) == 0 && len(d.pend) == 0 && utf8.ValidString(p) {
		return p // complete characters, nothing held: no copy needed
	}
	d.in = append(d.in[:0], p...)
	return d.push(d.in, false)
}

// Flush returns the text still held back at the end of the sequence, with
// an incomplete final character as U+FFFD. Ids added after Flush continue
// the sequence, but no clean-up or character joins across the flush.
func (d *Decoder) Flush() string {
	return d.push(nil, true)
}

func (d *Decoder) push(b []byte, final bool) string {
	for i, s := range d.stages {
		out := s.feed(d.tmp[i%2][:0], b, final)
		d.tmp[i%2] = out
		b = out
	}
	d.pend = append(d.pend, b...)
	end := len(d.pend)
	if !final {
		// hold an incomplete final character
		for k := 1; k <= utf8.UTFMax && k <= end; k++ {
			c := d.pend[end-k]
			if c&0xC0 != 0x80 { // a start byte (or ASCII)
				if !utf8.FullRune(d.pend[end-k:]) {
					end -= k
				}
				break
			}
		}
	}
	out := string(appendValidUTF8(nil, d.pend[:end]))
	d.pend = append(d.pend[:0], d.pend[end:]...)
	return out
}
