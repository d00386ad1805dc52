package tokenizer

import (
	"strings"
	"testing"
)

// promptOf repeats the llama.cpp test strings until tok encodes text to at
// least n tokens.
func promptOf(b *testing.B, tok *Tokenizer, n int) string {
	inputs, _ := loadVectors(b, "testdata/tokenizer/ggml-vocab-llama-spm.gguf")
	text := strings.Join(inputs, "\n")
	var sb strings.Builder
	for len(tok.Encode(sb.String(), false, false)) < n {
		sb.WriteString(text)
	}
	return sb.String()
}

func benchEncode(b *testing.B, gguf string) {
	tok := loadTokenizer(b, gguf)
	prompt := promptOf(b, tok, 4096)
	b.SetBytes(int64(len(prompt)))
	b.ResetTimer()
	for b.Loop() {
		tok.Encode(prompt, true, false)
	}
}

// BenchmarkEncodeSPM4096 tokenizes a prompt of ≥ 4096 Llama 2 tokens.
func BenchmarkEncodeSPM4096(b *testing.B) {
	benchEncode(b, "testdata/tokenizer/ggml-vocab-llama-spm.gguf")
}

// BenchmarkEncodeGPT2_4096 tokenizes a prompt of ≥ 4096 GPT-2 tokens.
func BenchmarkEncodeGPT2_4096(b *testing.B) {
	benchEncode(b, "testdata/tokenizer/ggml-vocab-gpt-2.gguf")
}

// BenchmarkEncodeDeepseekLLM4096 exercises the regex-list pre-tokenizer and
// 2400 user-defined tokens.
func BenchmarkEncodeDeepseekLLM4096(b *testing.B) {
	benchEncode(b, "testdata/tokenizer/ggml-vocab-deepseek-llm.gguf")
}

// BenchmarkEncodeSynthetic needs no shared data: 16 KiB of text on a
// byte-complete BPE vocabulary with the llama3 pre-tokenizer.
func BenchmarkEncodeSynthetic(b *testing.B) {
	tok := mustNew(b, bpeVocab("llama3", []string{"Ġ t", "h e", "Ġt he", "i n", "Ġ a"}, nil))
	prompt := strings.Repeat("the cat sat on the mat, and then 1234 dogs ran in. ", 320)
	b.SetBytes(int64(len(prompt)))
	b.ResetTimer()
	for b.Loop() {
		tok.Encode(prompt, false, false)
	}
}

// BenchmarkDecoder streams 4096 tokens through a Decoder.
func BenchmarkDecoder(b *testing.B) {
	tok := loadTokenizer(b, "testdata/tokenizer/ggml-vocab-gpt-2.gguf")
	ids := tok.Encode(promptOf(b, tok, 4096), false, false)
	b.ResetTimer()
	for b.Loop() {
		d := tok.NewDecoder()
		for _, id := range ids {
			d.Add(id)
		}
		d.Flush()
	}
}
