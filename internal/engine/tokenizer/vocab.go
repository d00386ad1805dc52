package tokenizer

import (
	"errors"
	"fmt"
)

// TokenType is the per-token type stored in tokenizer.ggml.token_type.
type TokenType int32

// Token types, numbered as in llama.cpp's llama_token_type.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// String returns the lower-case name of the type, or "type(N)" for a value
// outside the known range.
func (t TokenType) String() string {
	switch t {
	case TypeUndefined:
		return "undefined"
	case TypeNormal:
		return "normal"
	case TypeUnknown:
		return "unknown"
	case TypeControl:
		return "control"
	case TypeUserDefined:
		return "user-defined"
	case TypeUnused:
		return "unused"
	case TypeByte:
		return "byte"
	}
	return fmt.Sprintf("type(%d)", int32(t))
}

// Vocab holds what a GGUF file's tokenizer.* keys say about its vocabulary.
// Special token ids are -1 when absent. VocabFromMetadata fills the flags
// and ids that a file leaves out with llama.cpp's defaults; a Vocab built by
// hand is used as it is.
type Vocab struct {
	// Model is tokenizer.ggml.model: "llama" (SentencePiece, SPM) or "gpt2"
	// (byte-level BPE).
	Model string
	// Pre is tokenizer.ggml.pre, the BPE pre-tokenizer ("" means "default").
	// SPM vocabularies ignore it.
	Pre string
	// Name is general.name. llama.cpp keys one tokenizer quirk on it: for
	// Phi-3 models, special tokens swallow the white space after them.
	Name string

	// Tokens holds the token texts, indexed by id.
	Tokens []string
	// Scores holds the SPM merge priorities (nil means all zero).
	Scores []float32
	// Types holds the token types (nil means all normal).
	Types []TokenType
	// Merges holds the BPE merges, "left right", rank = index.
	Merges []string

	// BOS, EOS, EOT, EOM, UNK, PAD and SEP are special token ids.
	BOS, EOS, EOT, EOM, UNK, PAD, SEP int32
	// FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep and FIMSep are the
	// fill-in-the-middle token ids; FIMPad, FIMRep and FIMSep end generation.
	FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep, FIMSep int32

	// AddBOS and AddEOS say whether Encode with addSpecial adds BOS/EOS.
	// A WordPiece ("bert") vocabulary always adds BOS ([CLS]) and SEP
	// ([SEP]) with addSpecial, as llama.cpp does.
	AddBOS, AddEOS bool
	// Lowercase and StripAccents are the WordPiece normalizer's options
	// (tokenizer.ggml.normalizer.lowercase and .strip_accents; the latter
	// defaults to the former).
	Lowercase, StripAccents bool
	// AddSpacePrefix says whether SPM text gets a leading space (and Decode
	// strips it again).
	AddSpacePrefix bool

	// ChatTemplate is tokenizer.chat_template (Jinja source), "" if absent.
	ChatTemplate string
}

// Metadata is the read access to GGUF key/value pairs that VocabFromMetadata
// needs. Each method reports false when the key is absent or holds another
// type.
type Metadata interface {
	String(key string) (string, bool)
	Strings(key string) ([]string, bool)
	Float32s(key string) ([]float32, bool)
	Int32s(key string) ([]int32, bool)
	Uint32(key string) (uint32, bool)
	Bool(key string) (bool, bool)
}

// GGUF metadata keys read by VocabFromMetadata.
const (
	keyModel        = "tokenizer.ggml.model"
	keyPre          = "tokenizer.ggml.pre"
	keyTokens       = "tokenizer.ggml.tokens"
	keyScores       = "tokenizer.ggml.scores"
	keyTypes        = "tokenizer.ggml.token_type"
	keyMerges       = "tokenizer.ggml.merges"
	keyAddBOS       = "tokenizer.ggml.add_bos_token"
	keyAddEOS       = "tokenizer.ggml.add_eos_token"
	keyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	keyChatTemplate = "tokenizer.chat_template"
	keyName         = "general.name"
)

// ErrNoVocab is wrapped by VocabFromMetadata's error when the metadata has no
// tokenizer at all.
var ErrNoVocab = errors.New("no tokenizer in metadata")

// VocabFromMetadata reads the tokenizer.ggml.* keys (and general.name) into
// a Vocab. It applies llama.cpp's defaults for absent keys: SPM ("llama")
// vocabularies get add_bos=true, add_space_prefix=true and BOS=1, EOS=2,
// UNK=0; BPE ("gpt2") vocabularies get add_space_prefix=false and add_bos
// true only for the llama3/falcon3 pre-tokenizers. A special token id that
// is not a valid index keeps its default, as in llama.cpp. Arrays whose
// length differs from the token list are an error.
func VocabFromMetadata(md Metadata) (*Vocab, error) {
	model, ok := md.String(keyModel)
	if !ok {
		return nil, fmt.Errorf("read vocab: key %s missing: %w", keyModel, ErrNoVocab)
	}
	v := &Vocab{
		Model: model,
		BOS:   -1, EOS: -1, EOT: -1, EOM: -1, UNK: -1, PAD: -1, SEP: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
	}
	v.Pre, _ = md.String(keyPre)
	v.Name, _ = md.String(keyName)
	v.ChatTemplate, _ = md.String(keyChatTemplate)

	tokens, ok := md.Strings(keyTokens)
	if !ok {
		return nil, fmt.Errorf("read vocab: key %s missing or not a string array", keyTokens)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("read vocab: %s is empty", keyTokens)
	}
	v.Tokens = tokens
	n := len(tokens)

	if scores, ok := md.Float32s(keyScores); ok {
		if len(scores) != n {
			return nil, fmt.Errorf("read vocab: %s has %d entries, %s has %d", keyScores, len(scores), keyTokens, n)
		}
		v.Scores = scores
	}
	if types, ok := md.Int32s(keyTypes); ok {
		if len(types) != n {
			return nil, fmt.Errorf("read vocab: %s has %d entries, %s has %d", keyTypes, len(types), keyTokens, n)
		}
		v.Types = make([]TokenType, n)
		for i, t := range types {
			tt := TokenType(t)
			if tt < TypeUndefined || tt > TypeByte {
				tt = TypeUndefined // llama.cpp treats unknown values as undefined
			}
			v.Types[i] = tt
		}
	}

	switch model {
	case modelSPM:
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS = true
		v.AddSpacePrefix = true
	case modelWPM:
		v.BOS, v.UNK, v.SEP, v.PAD = 101, 100, 102, 0
		v.AddBOS = true
	case modelBPE, modelGemma4:
		merges, ok := md.Strings(keyMerges)
		if !ok {
			return nil, fmt.Errorf("read vocab: BPE vocabulary without %s", keyMerges)
		}
		v.Merges = merges
		if _, ok := addBOSPre[v.Pre]; ok {
			v.AddBOS = true
		}
	}
	// A default id must itself be valid (a vocab of fewer than 3 tokens).
	for _, p := range []*int32{&v.BOS, &v.EOS, &v.UNK, &v.SEP, &v.PAD} {
		if int(*p) >= n {
			*p = -1
		}
	}

	ids := []struct {
		key string
		dst *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.eom_token_id", &v.EOM},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.seperator_token_id", &v.SEP},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		{"tokenizer.ggml.fim_pre_token_id", &v.FIMPre},
		{"tokenizer.ggml.fim_suf_token_id", &v.FIMSuf},
		{"tokenizer.ggml.fim_mid_token_id", &v.FIMMid},
		{"tokenizer.ggml.fim_pad_token_id", &v.FIMPad},
		{"tokenizer.ggml.fim_rep_token_id", &v.FIMRep},
		{"tokenizer.ggml.fim_sep_token_id", &v.FIMSep},
		// deprecated spellings, read after the new ones as llama.cpp does
		{"tokenizer.ggml.prefix_token_id", &v.FIMPre},
		{"tokenizer.ggml.suffix_token_id", &v.FIMSuf},
		{"tokenizer.ggml.middle_token_id", &v.FIMMid},
	}
	for _, id := range ids {
		if x, ok := md.Uint32(id.key); ok && uint64(x) < uint64(n) {
			*id.dst = int32(x)
		}
	}

	if b, ok := md.Bool(keyAddBOS); ok {
		v.AddBOS = b
	}
	if model == modelGemma4 || (model == modelBPE && (v.Pre == "gemma4" || v.Pre == "granite-embed-multi-311m")) {
		v.AddBOS = true // llama.cpp forces BOS on for Gemma 4's pre-tokenizer
	}
	if b, ok := md.Bool(keyAddEOS); ok {
		v.AddEOS = b
	}
	if b, ok := md.Bool(keyAddPrefix); ok {
		v.AddSpacePrefix = b
	}
	v.Lowercase, _ = md.Bool("tokenizer.ggml.normalizer.lowercase")
	v.StripAccents = v.Lowercase
	if b, ok := md.Bool("tokenizer.ggml.normalizer.strip_accents"); ok {
		v.StripAccents = b
	}
	return v, nil
}
