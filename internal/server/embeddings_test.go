package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/embed"
	"tandem/internal/engine/model"
)

// fakeEmbedder returns, per input, a 4-dimensional unit vector made from
// its token ids, and records the inputs it got.
type fakeEmbedder struct {
	info embed.Info
	mu   sync.Mutex
	got  [][]int32
	err  error
}

func (f *fakeEmbedder) Info() embed.Info { return f.info }

func (f *fakeEmbedder) Embed(_ context.Context, inputs [][]int32) ([][]float32, error) {
	f.mu.Lock()
	f.got = append(f.got, inputs...)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		v := []float32{float32(len(in)), float32(in[0]), 1, 2}
		model.Normalize(v)
		out[i] = v
	}
	return out, nil
}

func embeddingServer(t *testing.T, dims []int, o Options) (*fakeEmbedder, http.Handler) {
	t.Helper()
	tok := testVocab(t, "", false)
	f := &fakeEmbedder{info: embed.Info{Name: "emb", Dim: 4, Context: 32, Vocab: tok.VocabSize(), Pooling: model.PoolMean, Dims: dims}}
	o.Embeddings, o.ModelName = f, "emb"
	s, _ := newTestServer(t, EmbeddingBackend(f.info, tok), o)
	return f, s.Handler()
}

type embeddingDoc struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeEmbeddings(t *testing.T, body string) (embeddingDoc, [][]float32) {
	t.Helper()
	var d embeddingDoc
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	var vecs [][]float32
	for _, e := range d.Data {
		var v []float32
		if e.Embedding[0] == '"' {
			var s string
			json.Unmarshal(e.Embedding, &s)
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+4 <= len(b); i += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
			}
		} else if err := json.Unmarshal(e.Embedding, &v); err != nil {
			t.Fatal(err)
		}
		vecs = append(vecs, v)
	}
	return d, vecs
}

// TestEmbeddingsShapes: every input form gives OpenAI's answer shape, in
// order, with usage; base64 carries the same little-endian float32s as the
// float answer.
func TestEmbeddingsShapes(t *testing.T) {
	f, h := embeddingServer(t, nil, Options{})
	rec := do(h, http.MethodPost, "/v1/embeddings", `{"model":"emb","input":["hello","hello world"]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	d, floats := decodeEmbeddings(t, rec.Body.String())
	if d.Object != "list" || d.Model != "emb" || len(d.Data) != 2 || d.Data[1].Index != 1 || d.Data[0].Object != "embedding" {
		t.Errorf("answer %s", rec.Body)
	}
	want := 0
	for _, in := range f.got {
		want += len(in)
	}
	if d.Usage.PromptTokens != want || d.Usage.TotalTokens != want {
		t.Errorf("usage %+v, want %d tokens", d.Usage, want)
	}
	rec = do(h, http.MethodPost, "/v1/embeddings", `{"input":["hello","hello world"],"encoding_format":"base64"}`)
	_, b64 := decodeEmbeddings(t, rec.Body.String())
	for i := range floats {
		if !slices.Equal(floats[i], b64[i]) {
			t.Errorf("input %d: base64 %v, float %v", i, b64[i], floats[i])
		}
	}
	for _, body := range []string{`{"input":"hello"}`, `{"input":[5,6,7]}`, `{"input":[[5,6],[7]]}`} {
		f.got = nil
		rec := do(h, http.MethodPost, "/v1/embeddings", body)
		if rec.Code != 200 {
			t.Errorf("%s: status %d: %s", body, rec.Code, rec.Body)
		}
	}
	if !slices.EqualFunc(f.got, [][]int32{{5, 6}, {7}}, slices.Equal) {
		t.Errorf("token arrays reached the model as %v", f.got)
	}
}

// TestEmbeddingsDimensions: a truncation the model allows is cut and
// normalized again; one it does not is a 400 that says why.
func TestEmbeddingsDimensions(t *testing.T) {
	_, h := embeddingServer(t, []int{2}, Options{})
	rec := do(h, http.MethodPost, "/v1/embeddings", `{"input":"hello","dimensions":2}`)
	_, v := decodeEmbeddings(t, rec.Body.String())
	if len(v) != 1 || len(v[0]) != 2 || math.Abs(float64(v[0][0]*v[0][0]+v[0][1]*v[0][1])-1) > 1e-6 {
		t.Errorf("dimensions 2: %v (%s)", v, rec.Body)
	}
	for _, body := range []string{`{"input":"hello","dimensions":3}`, `{"input":"hello","dimensions":0}`, `{"input":"hello","dimensions":5}`} {
		rec := do(h, http.MethodPost, "/v1/embeddings", body)
		if e := decodeError(t, rec.Body.String()); rec.Code != 400 || deref(e.Error.Param) != "dimensions" {
			t.Errorf("%s: %d %s", body, rec.Code, rec.Body)
		}
	}
	_, h = embeddingServer(t, nil, Options{})
	rec = do(h, http.MethodPost, "/v1/embeddings", `{"input":"hello","dimensions":2}`)
	if e := decodeError(t, rec.Body.String()); rec.Code != 400 || !strings.Contains(e.Error.Message, "not trained for truncated") {
		t.Errorf("no truncation allowed: %d %s", rec.Code, rec.Body)
	}
}

// TestEmbeddingsRefusals: bad inputs, unknown models, over-long inputs and
// generation requests on an embedding model get their errors; a server
// without an embedder refuses embeddings; a PD worker wants the cluster
// credential.
func TestEmbeddingsRefusals(t *testing.T) {
	f, h := embeddingServer(t, nil, Options{})
	for body, param := range map[string]string{
		`{"input":""}`:                           "input",
		`{"input":[]}`:                           "input",
		`{"input":[[]]}`:                         "input[0]",
		`{"input":["a",""]}`:                     "input[1]",
		`{"input":[1.5]}`:                        "input",
		`{"input":[99999]}`:                      "input",
		`{"input":{"a":1}}`:                      "input",
		`{"input":[true]}`:                       "input[0]",
		`{}`:                                     "input",
		`{"input":"hi","encoding_format":"hex"}`: "encoding_format",
		`{"input":[[` + strings.Repeat("1,", 32) + `1]]}`: "input",
	} {
		rec := do(h, http.MethodPost, "/v1/embeddings", body)
		if e := decodeError(t, rec.Body.String()); rec.Code != 400 || deref(e.Error.Param) != param {
			t.Errorf("%s: %d %s, want 400 on %s", body, rec.Code, rec.Body, param)
		}
	}
	if rec := do(h, http.MethodPost, "/v1/embeddings", `{"input":"hi","model":"other"}`); rec.Code != 404 {
		t.Errorf("unknown model: %d %s", rec.Code, rec.Body)
	}
	if rec := do(h, http.MethodPost, "/v1/completions", `{"prompt":"hi"}`); rec.Code != 400 || !strings.Contains(rec.Body.String(), "embedding model") {
		t.Errorf("completion on an embedding model: %d %s", rec.Code, rec.Body)
	}
	f.err = embed.ErrQueueFull
	if rec := do(h, http.MethodPost, "/v1/embeddings", `{"input":"hi"}`); rec.Code != 429 {
		t.Errorf("queue full: %d %s", rec.Code, rec.Body)
	}
	s, _ := newTestServer(t, newFake(t, testVocab(t, "", false)), Options{})
	if rec := do(s.Handler(), http.MethodPost, "/v1/embeddings", `{"input":"hi"}`); rec.Code != 400 || !strings.Contains(rec.Body.String(), "not an embedding model") {
		t.Errorf("generative model: %d %s", rec.Code, rec.Body)
	}
	keys, err := leg.NewKeys([]byte(strings.Repeat("k", leg.TokenMin)))
	if err != nil {
		t.Fatal(err)
	}
	_, h = embeddingServer(t, nil, Options{LegKeys: keys, Legs: backendLegs{}})
	if rec := do(h, http.MethodPost, "/v1/embeddings", `{"input":"hi"}`); rec.Code != 401 {
		t.Errorf("PD worker without the credential: %d %s", rec.Code, rec.Body)
	}
}
