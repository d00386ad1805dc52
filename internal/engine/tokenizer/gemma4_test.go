package tokenizer

import (
	"os"
	"path/filepath"
	"testing"

	"tandem/internal/testenv"
)

// gemma4VocabPath finds llama.cpp's Gemma 4 test vocabulary
// (models/ggml-vocab-gemma-4.gguf with its .inp/.out vectors): in the
// shared folder's testdata/tokenizer, else in the llama.cpp checkout named
// by TANDEM_LLAMA_SRC (its models/ folder). The test skips without it.
func gemma4VocabPath(t *testing.T) string {
	t.Helper()
	const name = "ggml-vocab-gemma-4.gguf"
	var dirs []string
	if d := os.Getenv("TANDEM_LLAMA_SRC"); d != "" {
		dirs = append(dirs, filepath.Join(d, "models"))
	}
	if d := testenv.SharedDir(); d != "" {
		dirs = append(dirs, filepath.Join(d, "testdata", "tokenizer"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p + ".out"); err == nil {
			return p
		}
	}
	t.Skipf("%s not found (set TANDEM_LLAMA_SRC to a llama.cpp checkout at 80fb11a or later)", name)
	return ""
}

// TestGemma4Vectors checks the gemma4 tokenizer model (SentencePiece-style
// BPE) against llama.cpp's test vectors for the real Gemma 4 vocabulary
// (262144 tokens): add_special=false, parse_special=false.
func TestGemma4Vectors(t *testing.T) {
	p := gemma4VocabPath(t)
	md, err := readTestGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VocabFromMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	inputs, want := loadVectorsAbs(t, p)
	bad := 0
	for i, in := range inputs {
		got := tok.Encode(in, false, false)
		if !equalIDs(got, want[i]) {
			bad++
			t.Errorf("Encode(%s) = %v, want %v", quotePrefix(in), got, want[i])
		}
	}
	t.Logf("%d/%d vectors equal", len(inputs)-bad, len(inputs))
}
