//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestEmbeddingsServeAndUp: a synthesized nomic-bert served by `tandem
// serve` (the file mapped) and by `tandem up` (through the router to either
// worker, each with --mmap=false: the file read into memory) gives the
// same vectors for a batch of inputs, unit length, in OpenAI's shape;
// generation requests on it are refused with a 400.
func TestEmbeddingsServeAndUp(t *testing.T) {
	setup(t)
	model := filepath.Join(t.TempDir(), "nomic.gguf")
	runTandem(t, time.Minute, "model", "synth", "--arch", "nomic-bert", "--preset", "tiny", "--type", "f32", "--rope-base", "1000", "-o", model)
	serve := startServe(t, model)
	up := startUp(t, model, "--worker-arg=--mmap=false")
	body := `{"input":["hello world","the little girl saw a big dog.",[101,200,102]],"encoding_format":"float"}`
	get := func(base string) [][]float64 {
		t.Helper()
		resp, err := http.Post(base+"/v1/embeddings", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			Data []struct {
				Index     int
				Embedding []float64
			}
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s/v1/embeddings: %d %v", base, resp.StatusCode, err)
		}
		var out [][]float64
		for i, d := range doc.Data {
			var n float64
			for _, x := range d.Embedding {
				n += x * x
			}
			if d.Index != i || len(d.Embedding) != 256 || math.Abs(n-1) > 1e-5 {
				t.Errorf("%s: item %d has index %d, %d dimensions, squared norm %v", base, i, d.Index, len(d.Embedding), n)
			}
			out = append(out, d.Embedding)
		}
		if len(out) != 3 || doc.Usage.PromptTokens < 3+10 {
			t.Errorf("%s: %d vectors, usage %+v", base, len(out), doc.Usage)
		}
		return out
	}
	want := get(serve)
	for range 3 { // the router alternates between the two workers
		if got := get(up); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("tandem up's vectors differ from tandem serve's")
		}
	}
	// Generation: tandem serve says the model only embeds (400), and so
	// does the router of `tandem up` (every request disaggregated here):
	// the prefill worker's /pd/info says its model only embeds.
	name := map[string]string{serve: "serve", up: "up"}
	for _, base := range []string{serve, up} {
		for path, body := range map[string]string{
			"/v1/completions":      `{"prompt":"hi","max_tokens":2}`,
			"/v1/chat/completions": `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`,
		} {
			resp, err := http.Post(base+path, "application/json", bytes.NewReader([]byte(body)))
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !bytes.Contains(msg, []byte("embedding model")) {
				t.Errorf("%s on an embedding model (%s): %d %s, want a 400 that says it embeds", path, name[base], resp.StatusCode, msg)
			}
		}
	}
}
