package tokenizer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tokenizer model names (tokenizer.ggml.model).
const (
	modelSPM = "llama"
	modelBPE = "gpt2"
	modelWPM = "bert"
	// modelGemma4 is Gemma 4's SentencePiece-style BPE: merges over raw
	// UTF-8 with spaces written "▁", byte fallback to <0xXX> tokens.
	modelGemma4 = "gemma4"
)

// Tokenizer turns text into token ids and back, reproducing llama.cpp's
// llama_tokenize and llama_detokenize for SPM and byte-level BPE
// vocabularies. It is immutable after New and safe for concurrent use.
type Tokenizer struct {
	v   *Vocab
	bpe bool
	wpm bool // WordPiece (tokenizer.ggml.model "bert"): wpm.go

	maxTokenLen int         // WordPiece: the longest token text, in bytes
	texts       []string    // token texts; empty ones renamed "[EMPTY_<id>]" as llama.cpp does
	attrs       []TokenType // effective types after llama.cpp's name-based overrides
	toID        map[string]int32

	// SPM
	byteTok [256]int32 // byte fallback token per byte, -1 if none

	// BPE
	ranks        map[mergePair]int32
	pre          *preTokenizer
	ignoreMerges bool
	cleanSpaces  bool
	// spmStyle (the gemma4 pre-tokenizer): spaces become "▁" before
	// merging, words keep their raw UTF-8 (no GPT-2 byte mapping), bytes
	// fall back to "<0xXX>" tokens and a word of newlines that is itself a
	// token is not merged.
	spmStyle bool

	specials []int32         // special tokens, longest text first
	strip    map[int32]uint8 // stripLeft/stripRight per special token
	eog      map[int32]bool  // end-of-generation ids
	pieces   []string        // TokenPiece per id
	eot      int32           // effective EOT (from the file or detected by name)
}

const (
	stripLeft  uint8 = 1 // LSTRIP: white space before the token is dropped
	stripRight uint8 = 2 // RSTRIP: white space after the token is dropped
)

// mergePair is a BPE merge, looked up by its two halves.
type mergePair struct{ left, right string }

// Token texts that llama.cpp treats as special by name, and the id each
// one fills when the file does not set it. A token found this way is made
// a control token.
var (
	eotNames    = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>"}
	eomNames    = []string{"<|eom_id|>"}
	fimPreNames = []string{"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>"}
	fimSufNames = []string{"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>"}
	fimMidNames = []string{"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>"}
	fimPadNames = []string{"<|fim_pad|>", "<fim-pad>", "<PAD>"}
	fimRepNames = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"}
	fimSepNames = []string{"<|file_sep|>"}
	// eogNames end generation whatever the file says.
	eogNames = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
		"<eos>", "<turn|>", "<|tool_response>"} // the last three: Gemma 4
	// harmonyShown are gpt-oss's (o200k_harmony's) message markers, which
	// llama.cpp makes user-defined so that decoding shows them: a harmony
	// parser reads the channels from the text.
	harmonyShown = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// New checks a vocabulary and builds its tokenizer. It fails for a model
// other than "llama" (SPM) or "gpt2" (BPE), for a BPE pre-tokenizer it does
// not implement, for arrays whose length differs from Tokens, for a special
// token id out of range and for duplicate token texts (which llama.cpp
// refuses too).
func New(v *Vocab) (*Tokenizer, error) {
	if v == nil {
		return nil, fmt.Errorf("new tokenizer: nil vocab")
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("new tokenizer: vocab has no tokens")
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("new tokenizer: %d tokens do not fit int32 ids", n)
	}
	t := &Tokenizer{v: v}
	switch v.Model {
	case modelSPM:
	case modelBPE, modelGemma4:
		t.bpe = true
	case modelWPM:
		t.wpm = true
	default:
		return nil, fmt.Errorf("new tokenizer: unsupported tokenizer model %q (want %q, %q, %q or %q)", v.Model, modelSPM, modelBPE, modelGemma4, modelWPM)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("new tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("new tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	for _, s := range []struct {
		name string
		id   int32
	}{
		{"bos", v.BOS}, {"eos", v.EOS}, {"eot", v.EOT}, {"eom", v.EOM}, {"unk", v.UNK}, {"pad", v.PAD}, {"sep", v.SEP},
		{"fim_pre", v.FIMPre}, {"fim_suf", v.FIMSuf}, {"fim_mid", v.FIMMid}, {"fim_pad", v.FIMPad}, {"fim_rep", v.FIMRep}, {"fim_sep", v.FIMSep},
	} {
		if s.id < -1 || int(s.id) >= n {
			return nil, fmt.Errorf("new tokenizer: %s token id %d out of range [0, %d)", s.name, s.id, n)
		}
	}

	t.texts = make([]string, n)
	t.toID = make(map[string]int32, n)
	for i, s := range v.Tokens {
		if s == "" {
			s = "[EMPTY_" + strconv.Itoa(i) + "]"
		}
		t.texts[i] = s
		if j, dup := t.toID[s]; dup {
			return nil, fmt.Errorf("new tokenizer: token text %q appears at ids %d and %d", s, j, i)
		}
		t.toID[s] = int32(i)
	}
	t.attrs = make([]TokenType, n)
	for i := range t.attrs {
		t.attrs[i] = TypeNormal
		if v.Types != nil {
			t.attrs[i] = v.Types[i]
			if t.attrs[i] < TypeUndefined || t.attrs[i] > TypeByte {
				t.attrs[i] = TypeUndefined
			}
		}
	}

	if t.bpe {
		preName := v.Pre
		if v.Model == modelGemma4 {
			preName = modelGemma4 // llama.cpp ignores the file's pre for this model
		}
		cfg, ok := preConfigs[preName]
		if !ok {
			return nil, fmt.Errorf("new tokenizer: unsupported BPE pre-tokenizer %q", v.Pre)
		}
		pre, err := newPreTokenizer(cfg.regexes)
		if err != nil {
			return nil, fmt.Errorf("new tokenizer: pre-tokenizer %q: %w", v.Pre, err)
		}
		t.pre = pre
		t.ignoreMerges = cfg.ignoreMerges
		t.cleanSpaces = cfg.cleanSpaces
		t.spmStyle = cfg.spmStyle
		t.ranks = make(map[mergePair]int32, len(v.Merges))
		for i, m := range v.Merges {
			// llama.cpp splits at the first space after the first byte; a
			// merge without one is recorded as ("", "").
			var p mergePair
			if j := strings.IndexByte(m[min(1, len(m)):], ' '); j >= 0 {
				j += min(1, len(m))
				p = mergePair{m[:j], m[j+1:]}
			}
			if _, dup := t.ranks[p]; !dup {
				t.ranks[p] = int32(i)
			}
		}
	}
	if t.wpm {
		t.initWPM()
	} else if !t.bpe || t.spmStyle {
		const hex = "0123456789ABCDEF"
		for b := 0; b < 256; b++ {
			t.byteTok[b] = -1
			if id, ok := t.toID[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
				t.byteTok[b] = id
			} else if id, ok := t.toID[string([]byte{byte(b)})]; ok && b != 0 && !t.bpe {
				t.byteTok[b] = id
			}
		}
	}

	t.findSpecials()
	t.buildPieces()
	return t, nil
}

// findSpecials fills in EOT/EOM/FIM ids from token names, applies the
// control-type overrides, builds the end-of-generation set and the list of
// special tokens that Encode splits out, as llama.cpp's vocab loader does.
func (t *Tokenizer) findSpecials() {
	v := t.v
	eot, eom := v.EOT, v.EOM
	fimPre, fimSuf, fimMid, fimPad, fimRep, fimSep := v.FIMPre, v.FIMSuf, v.FIMMid, v.FIMPad, v.FIMRep, v.FIMSep
	detect := func(id *int32, names []string) {
		if *id >= 0 {
			return
		}
		for _, name := range names {
			if i, ok := t.toID[name]; ok && (*id < 0 || i < *id) {
				*id = i
			}
		}
		if *id >= 0 {
			t.attrs[*id] = TypeControl
		}
	}
	detect(&eot, eotNames)
	detect(&eom, eomNames)
	detect(&fimPre, fimPreNames)
	detect(&fimSuf, fimSufNames)
	detect(&fimMid, fimMidNames)
	detect(&fimPad, fimPadNames)
	detect(&fimRep, fimRepNames)
	detect(&fimSep, fimSepNames)
	t.eot = eot

	t.eog = make(map[int32]bool)
	for _, id := range []int32{fimPad, fimRep, fimSep, v.EOS, eot, eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, name := range eogNames {
		if id, ok := t.toID[name]; ok {
			t.eog[id] = true
			t.attrs[id] = TypeControl
		}
	}
	for _, name := range harmonyShown {
		if id, ok := t.toID[name]; ok {
			t.attrs[id] = TypeUserDefined
		}
	}
	// gpt-oss (harmony): <|end|> closes a message but not the turn, which
	// <|return|> or <|call|> end; it is shown and generation goes on.
	_, hasReturn := t.toID["<|return|>"]
	_, hasCall := t.toID["<|call|>"]
	if end, ok := t.toID["<|end|>"]; ok && hasReturn && hasCall {
		delete(t.eog, end)
		t.attrs[end] = TypeUserDefined
	}

	// Gemma 4: with <|tool_response> ending generation, "</s>" does not,
	// and is an ordinary token.
	if tr, ok := t.toID["<|tool_response>"]; ok && t.eog[tr] {
		if s, ok := t.toID["</s>"]; ok && t.eog[s] {
			delete(t.eog, s)
			t.attrs[s] = TypeNormal
		}
	}

	for id, a := range t.attrs {
		if a == TypeControl || a == TypeUserDefined || a == TypeUnknown {
			t.specials = append(t.specials, int32(id))
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool {
		return len(t.texts[t.specials[i]]) > len(t.texts[t.specials[j]])
	})

	// Per-token strip attributes that llama.cpp sets by model name.
	t.strip = make(map[int32]uint8)
	name := strings.ToLower(v.Name)
	switch {
	case strings.Contains(v.Pre, "jina-v2-de") || strings.Contains(v.Pre, "jina-v2-es") || strings.Contains(v.Pre, "jina-v2-code"):
		if id, ok := t.toID["<mask>"]; ok {
			t.strip[id] |= stripLeft
		}
	case strings.Contains(name, "phi-3") || strings.Contains(name, "phi3"):
		for _, id := range t.specials {
			t.strip[id] |= stripRight
		}
		if id, ok := t.toID["</s>"]; ok {
			t.strip[id] |= stripRight
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.toID[s]; ok {
				t.strip[id] &^= stripRight
			}
		}
	}
}

// buildPieces computes every token's output bytes (llama.cpp's
// token_to_piece with special=false).
func (t *Tokenizer) buildPieces() {
	t.pieces = make([]string, len(t.texts))
	for id, text := range t.texts {
		switch a := t.attrs[id]; {
		case a == TypeControl || a == TypeUnknown:
			// dropped from output text
		case a == TypeUserDefined:
			t.pieces[id] = text
		case a == TypeNormal && t.bpe && !t.spmStyle:
			t.pieces[id] = bpeDecodeText(text)
		case a == TypeNormal:
			t.pieces[id] = strings.ReplaceAll(text, spmSpace, " ")
		case a == TypeByte:
			// llama.cpp reads "<0xXX>" for byte tokens of BPE vocabularies
			// too (Gemma 4's byte fallback).
			t.pieces[id] = string([]byte{spmByteValue(text)})
		}
	}
}

// spmByteValue parses a byte token's "<0xXX>" text as llama.cpp does
// (strtol on the two characters after "<0x", stopping at a non-hex digit).
func spmByteValue(text string) byte {
	var b byte
	for i := 3; i < 5 && i < len(text); i++ {
		c := text[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return b
		}
		b = b<<4 | d
	}
	return b
}

// fragment is a piece of input text, or a special token split out of it.
type fragment struct {
	id   int32 // special token, or -1 for text
	text string
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// partition splits text around special tokens (llama.cpp's
// tokenizer_st_partition): tokens are tried longest first, each splitting
// the text fragments left by the previous ones. Control and unknown tokens
// count only with parseSpecial; user-defined tokens always do.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{id: -1, text: text}}
	if len(t.specials) == 0 {
		return frags
	}
	// Cheap prefilter: which first bytes and byte pairs occur in text.
	var first [4]uint64
	var pairs []uint64
	for i := 0; i < len(text); i++ {
		first[text[i]>>6] |= 1 << (text[i] & 63)
	}
	havePair := func(a, b byte) bool {
		if pairs == nil {
			pairs = make([]uint64, 1024)
			for i := 0; i+1 < len(text); i++ {
				k := uint(text[i])<<8 | uint(text[i+1])
				pairs[k>>6] |= 1 << (k & 63)
			}
		}
		k := uint(a)<<8 | uint(b)
		return pairs[k>>6]&(1<<(k&63)) != 0
	}
	for _, id := range t.specials {
		a := t.attrs[id]
		if !parseSpecial && (a == TypeControl || a == TypeUnknown) {
			continue
		}
		tok := t.texts[id]
		if len(tok) > len(text) || first[tok[0]>>6]&(1<<(tok[0]&63)) == 0 {
			continue
		}
		if len(tok) > 1 && !havePair(tok[0], tok[1]) {
			continue
		}
		if !strings.Contains(text, tok) {
			continue
		}
		frags = splitFragments(frags, id, tok, t.strip[id])
	}
	return frags
}

func splitFragments(frags []fragment, id int32, tok string, strip uint8) []fragment {
	out := make([]fragment, 0, len(frags)+2)
	for _, f := range frags {
		if f.id >= 0 {
			out = append(out, f)
			continue
		}
		s := f.text
		for {
			i := strings.Index(s, tok)
			if i < 0 {
				if s != "" {
					out = append(out, fragment{id: -1, text: s})
				}
				break
			}
			left := s[:i]
			if strip&stripLeft != 0 {
				for len(left) > 0 && isCSpace(left[len(left)-1]) {
					left = left[:len(left)-1]
				}
			}
			if left != "" {
				out = append(out, fragment{id: -1, text: left})
			}
			out = append(out, fragment{id: id})
			s = s[i+len(tok):]
			if strip&stripRight != 0 {
				for len(s) > 0 && isCSpace(s[0]) {
					s = s[1:]
				}
			}
		}
	}
	return out
}

// Encode tokenizes text like llama.cpp's llama_tokenize. With addSpecial,
// BOS and EOS are added as the vocabulary's AddBOS/AddEOS say (skipped if
// the id is -1); with parseSpecial, control tokens written in the text
// (such as "<|im_end|>") become their ids. User-defined tokens are always
// recognised. Invalid UTF-8 never fails: SPM falls back to byte tokens, BPE
// treats each bad byte as U+FFFD.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	if t.wpm {
		return t.encodeWPMText(text, addSpecial, parseSpecial)
	}
	out := make([]int32, 0, len(text)/3+2)
	if addSpecial && t.v.AddBOS && t.v.BOS >= 0 {
		out = append(out, t.v.BOS)
	}
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial)
	}
	if t.bpe {
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f.id)
				continue
			}
			s := f.text
			if t.spmStyle {
				s = strings.ReplaceAll(s, " ", spmSpace)
			}
			out = t.encodeBPE(s, out)
		}
	} else {
		prevSpecial := true // the first fragment gets the space prefix
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f.id)
				prevSpecial = true
				continue
			}
			s := f.text
			if t.v.AddSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.encodeSPM(strings.ReplaceAll(s, " ", spmSpace), out)
			prevSpecial = false
		}
	}
	if addSpecial && t.v.AddEOS && t.v.EOS >= 0 {
		out = append(out, t.v.EOS)
	}
	return out
}

// piece returns the output text of one token ("" for an invalid id).
func (t *Tokenizer) piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// TokenPiece returns the bytes one token contributes to decoded text:
// nothing for control and unknown tokens and for invalid ids, the raw text
// of user-defined tokens, "▁" turned into a space for SPM tokens, the byte
// itself for SPM byte tokens, and the GPT-2 byte mapping undone for BPE
// tokens. The piece may be part of a UTF-8 character.
func (t *Tokenizer) TokenPiece(id int32) []byte {
	return []byte(t.piece(id))
}

// stripIndex is the position whose piece loses one leading space in Decode:
// the first token, or the second when the first is BOS; -1 if none.
func (t *Tokenizer) stripIndex(first int32) int {
	if !t.v.AddSpacePrefix {
		return -1
	}
	if first == t.v.BOS && t.v.BOS >= 0 {
		return 1
	}
	return 0
}

// Decode turns ids into text like llama.cpp's detokenize with
// special=false: control and unknown tokens are dropped, and with
// AddSpacePrefix (SPM) one leading space is removed from the first token
// after an optional leading BOS, undoing the prefix Encode adds. (Current
// llama.cpp removes it only from the very first token; the rule after BOS
// is that of its older common llama_detokenize_spm, kept so that
// Decode(Encode(s, true, false)) == s.) BPE vocabularies whose llama.cpp
// pre-tokenizer sets clean_spaces (gpt-2, llama3, default, …) get the same
// clean-up of spaces before punctuation and contractions. The result is
// raw bytes: a sequence cut inside a UTF-8 character yields invalid UTF-8.
func (t *Tokenizer) Decode(ids []int32) string {
	if len(ids) == 0 {
		return ""
	}
	si := t.stripIndex(ids[0])
	var b []byte
	for i, id := range ids {
		p := t.piece(id)
		if i == si && p != "" && p[0] == ' ' {
			p = p[1:]
		}
		b = append(b, p...)
	}
	if t.cleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b)
}

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.texts) }

// BOS returns the beginning-of-sequence token id, -1 if none.
func (t *Tokenizer) BOS() int32 { return t.v.BOS }

// EOS returns the end-of-sequence token id, -1 if none.
func (t *Tokenizer) EOS() int32 { return t.v.EOS }

// EOT returns the end-of-turn token id: the file's, else one found by name
// as llama.cpp does (<|eot_id|>, <|im_end|>, <|end|>, …); -1 if none.
func (t *Tokenizer) EOT() int32 { return t.eot }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, the FIM
// pad/repo/file-separator tokens and the tokens llama.cpp recognises by
// name (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>,
// <|eom_id|>, <EOT>).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// Vocab returns the vocabulary the tokenizer was built from. It must not be
// modified.
func (t *Tokenizer) Vocab() *Vocab { return t.v }
