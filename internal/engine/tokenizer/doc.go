// Package tokenizer converts between text and token ids the way llama.cpp
// does for GGUF models: SentencePiece-style BPE with scores ("SPM",
// tokenizer.ggml.model = "llama"), GPT-2 byte-level BPE ("gpt2"), Gemma 4's
// SentencePiece-style BPE ("gemma4", or "gpt2" with pre "gemma4") and
// BERT's WordPiece ("bert", wpm.go: words split on white space and
// punctuation, optionally lower-cased and stripped of accents, then
// longest-match pieces; Encode with addSpecial adds [CLS] and [SEP]).
//
// # Data flow
//
// A model loader reads the tokenizer.ggml.* keys of a GGUF file through the
// Metadata interface (satisfied by *gguf.File) with VocabFromMetadata, and
// New builds a Tokenizer from the Vocab. The server encodes prompts with
// Encode (addSpecial adds BOS as the vocabulary asks; parseSpecial turns
// control-token text such as "<|im_end|>" in chat templates into ids), the
// engine consumes the ids, and generated ids come back as text through a
// Decoder (streaming, never splitting a UTF-8 character) or Decode.
//
// # Algorithms (llama.cpp src/llama-vocab.cpp, unicode.cpp)
//
//   - Special tokens are split out of the text first, longest first.
//     User-defined tokens always are; control and unknown tokens only with
//     parseSpecial. Names that llama.cpp treats as end-of-turn or FIM tokens
//     (<|eot_id|>, <|endoftext|>, <｜fim▁begin｜>, …) become control tokens,
//     and Phi-3 special tokens swallow the white space after them.
//   - SPM: a space is prepended to each text fragment at the start or after
//     a special token (AddSpacePrefix), spaces become "▁", and starting from
//     single characters the adjacent pair forming the highest-scoring token
//     is merged (leftmost on ties) with a priority queue over a linked list
//     of symbols, O(n log n). Characters not in the vocabulary become
//     <0xXX> byte tokens.
//   - BPE: a pre-tokenizer cuts the text into words (hand-coded gpt-2,
//     llama3 and qwen2 splitters; regex lists for default, deepseek-coder
//     and deepseek-llm run on Go's regexp after llama.cpp's own rewrite of
//     \p{…} classes), each word's bytes are mapped through GPT-2's
//     bytes_to_unicode, and merges apply by rank. llama3 takes a word that
//     is itself a token without merging.
//   - gemma4: spaces become "▁", the text is cut only into runs of
//     newlines and runs of other characters, merges apply by rank over raw
//     UTF-8 (no byte mapping; a run of newlines that is a token stays
//     whole), and a symbol that is not a token becomes <0xXX> byte tokens.
//     BOS is always added with addSpecial (llama.cpp overrides
//     add_bos_token); <eos>, <turn|> and <|tool_response>, end generation,
//     and then "</s>" does not. Decoding turns "▁" into spaces and byte
//     tokens into bytes.
//   - Decoding drops control and unknown tokens, turns "▁" into spaces and
//     byte tokens into bytes (SPM) or undoes the byte mapping (BPE), removes
//     the space that Encode added (SPM), and applies llama.cpp's
//     clean_up_tokenization_spaces where the pre-tokenizer asks for it.
//
// # Invariants
//
// A Tokenizer is immutable after New and safe for concurrent use; a Decoder
// belongs to one sequence. Encode never fails and never panics: invalid
// UTF-8 takes the byte-fallback path (SPM) or becomes U+FFFD (BPE), as in
// llama.cpp. Every id Encode returns is a valid index. Decode returns raw
// bytes; Decoder output is always valid UTF-8 and equals Decode's text with
// invalid bytes replaced by U+FFFD.
//
// # Limits
//
// Only the SPM, BPE, gemma4 and WPM models are supported (not UGM/T5, RWKV),
// and among BPE pre-tokenizers the families listed in preConfigs (default,
// gpt-2 and aliases, llama3 and aliases, dbrx/smaug, qwen2 and aliases,
// deepseek-llm, deepseek-coder, gpt-4o/llama4, gemma4); New names any other. The
// o200k splitter follows the regex as the tokenizer.json states it, which
// differs from llama.cpp's rewrite on words with combining marks in
// scripts such as Devanagari and Thai (o200k.go). For gpt-oss (a vocabulary with
// <|return|> and <|call|>), as in llama.cpp, <|end|> does not end
// generation, and <|end|>, <|start|>, <|channel|>, <|message|> and
// <|constrain|> are user-defined, so decoding shows them. Decode also removes
// the SPM space from the token after a leading BOS, which current llama.cpp
// does not (older llama.cpp did), so that Decode(Encode(s, true, false)) is
// s. Unicode classes come from Go's unicode tables (Unicode 15.0), which
// may differ from llama.cpp's for recently assigned characters.
package tokenizer
