package synth

import (
	"fmt"
	"strings"

	"tandem/internal/engine/gguf"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// Special token ids of the synthesized vocabulary.
const (
	unkID = 0
	bosID = 1
	eosID = 2
)

// spaceMark is SentencePiece's visible space, U+2581.
const spaceMark = "▁"

// vocab is a tokenizer as GGUF keys: parallel token, score and type arrays.
type vocab struct {
	tokens []string
	scores []float32
	types  []int32
}

// commonWords are English words, most frequent first, biased towards the
// children's stories the project's test prompts use, capitalized where
// they start sentences or are names. Each becomes a "▁word" piece (with the
// prefixes SentencePiece merges pass through).
var commonWords = strings.Fields(`
the a and to was Once upon time there little girl named Lily She He The
They It One day he she it of in his her they with you on that said for
one is big so very at all not be have saw we up what as my boy play
wanted are happy friend mom like went out go could this tree sun did do
me an from them can fun when see get then him toy dog cat ball help new
no make too look who your some after would how about liked loved park
outside good back away home will each many more by into made found just
ran came know over thing say long way down But Then When Tim Ben Sue Max
Mom There
`)

// suffixes are word-internal pieces (no space mark).
var suffixes = strings.Fields(`ing ed er es ly s y e d t n r est ter ful ness ion tion ous`)

// letterOrder is English letter frequency order; it orders the filler pieces.
const letterOrder = "etaoinshrdlcumwfgypbvkjxqz"

// firstChars are the one-character pieces placed before the words;
// moreChars come after them (a character that is not a piece still
// tokenizes, as its byte token).
const (
	firstChars = letterOrder + ".,!?'"
	moreChars  = "ETAOINSHRDLCUMWFGYPBVKJXQZ0123456789\"-:;()"
)

// synthVocab builds a deterministic SentencePiece-style vocabulary of n
// tokens (n >= VocabMin): <unk>, <s>, </s>, the byte tokens <0x00>..<0xFF>,
// then pieces with descending scores: "▁", lower-case letters and
// punctuation, common words (each with its space-marked prefixes so merges
// can reach it), other characters, suffixes, and letter n-grams as filler.
func synthVocab(n int) vocab {
	v := vocab{
		tokens: make([]string, 0, n),
		scores: make([]float32, 0, n),
		types:  make([]int32, 0, n),
	}
	v.add("<unk>", 0, tokenUnknown)
	v.add("<s>", 0, tokenControl)
	v.add("</s>", 0, tokenControl)
	for b := range 256 {
		v.add(fmt.Sprintf("<0x%02X>", b), 0, tokenByte)
	}
	seen := make(map[string]bool, n)
	piece := func(p string) bool {
		if len(v.tokens) >= n {
			return false
		}
		if !seen[p] {
			seen[p] = true
			v.add(p, -float32(len(seen)-1), tokenNormal)
		}
		return len(v.tokens) < n
	}
	// withPrefixes adds every prefix of s that is at least two runes long,
	// shortest first, so each merge step on the way to s has a piece.
	withPrefixes := func(s string) bool {
		r := []rune(s)
		for i := 2; i <= len(r); i++ {
			if !piece(string(r[:i])) {
				return false
			}
		}
		return true
	}
	if !piece(spaceMark) {
		return v
	}
	for _, c := range firstChars {
		if !piece(string(c)) {
			return v
		}
	}
	for _, w := range commonWords {
		if !withPrefixes(spaceMark + w) {
			return v
		}
	}
	for _, c := range moreChars {
		if !piece(string(c)) {
			return v
		}
	}
	for _, s := range suffixes {
		if !withPrefixes(s) {
			return v
		}
	}
	// Filler: letter n-grams of growing length, in letter-frequency order,
	// each both word-initial ("▁ab") and word-internal ("ab").
	for length := 2; ; length++ {
		idx := make([]int, length)
		for {
			var b strings.Builder
			for _, i := range idx {
				b.WriteByte(letterOrder[i])
			}
			if !piece(spaceMark+b.String()) || !piece(b.String()) {
				return v
			}
			// Next combination, last letter fastest.
			k := length - 1
			for k >= 0 && idx[k] == len(letterOrder)-1 {
				idx[k] = 0
				k--
			}
			if k < 0 {
				break
			}
			idx[k]++
		}
	}
}

func (v *vocab) add(tok string, score float32, typ int32) {
	v.tokens = append(v.tokens, tok)
	v.scores = append(v.scores, score)
	v.types = append(v.types, typ)
}

// keys returns the tokenizer metadata of the synthesized vocabulary.
func (v vocab) keys() []gguf.KV {
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue(v.tokens)},
		{Key: "tokenizer.ggml.scores", Value: gguf.Float32sValue(v.scores)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32sValue(v.types)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(bosID)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(eosID)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32Value(unkID)},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.BoolValue(true)},
		{Key: "tokenizer.ggml.add_eos_token", Value: gguf.BoolValue(false)},
	}
}

// tokenizerKeysFrom reads every tokenizer.* key of the GGUF file at path and
// the vocabulary size (the length of tokenizer.ggml.tokens).
func tokenizerKeysFrom(path string) ([]gguf.KV, int, error) {
	if kvs, n, ok, err := hfKeysIfJSON(path); ok { // a Hugging Face tokenizer.json (hfvocab.go)
		return kvs, n, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read vocabulary: %w", err)
	}
	defer f.Close()
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok {
		return nil, 0, fmt.Errorf("read vocabulary from %s: no tokenizer.ggml.tokens string array", path)
	}
	if len(tokens) == 0 || len(tokens) > 1<<31-1 {
		return nil, 0, fmt.Errorf("read vocabulary from %s: tokenizer.ggml.tokens has %d entries", path, len(tokens))
	}
	var kvs []gguf.KV
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			kvs = append(kvs, kv)
		}
	}
	return kvs, len(tokens), nil
}
