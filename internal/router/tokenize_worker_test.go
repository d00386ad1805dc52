package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/router"
	"tandem/internal/router/pool"
	"tandem/internal/server"
)

// tokenOnlyBackend is a Backend for the tokenizer endpoints: it has a
// vocabulary and generates nothing.
type tokenOnlyBackend struct{ tok *tokenizer.Tokenizer }

func (b tokenOnlyBackend) Submit(context.Context, engine.Request) (server.Stream, error) {
	return nil, errors.New("this test backend generates nothing")
}
func (b tokenOnlyBackend) Stats() engine.Stats { return engine.Stats{} }
func (b tokenOnlyBackend) ModelConfig() model.Config {
	return model.Config{Name: "m", Context: 128, Vocab: b.tok.VocabSize()}
}
func (b tokenOnlyBackend) Tokenizer() *tokenizer.Tokenizer { return b.tok }

// byteVocab is a tiny SentencePiece vocabulary: <unk>, <s>, </s>, the 256
// byte tokens and the printable ASCII characters.
func byteVocab(t *testing.T) *tokenizer.Tokenizer {
	v := &tokenizer.Vocab{Model: "llama", BOS: 1, EOS: 2, EOT: -1, EOM: -1, UNK: 0, PAD: -1, SEP: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1, AddBOS: true, AddSpacePrefix: true}
	add := func(s string, typ tokenizer.TokenType, score float32) {
		v.Tokens, v.Types, v.Scores = append(v.Tokens, s), append(v.Types, typ), append(v.Scores, score)
	}
	add("<unk>", tokenizer.TypeUnknown, 0)
	add("<s>", tokenizer.TypeControl, 0)
	add("</s>", tokenizer.TypeControl, 0)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokenizer.TypeByte, 0)
	}
	add("▁", tokenizer.TypeNormal, -1)
	for c := byte(33); c < 127; c++ {
		add(string(c), tokenizer.TypeNormal, -2)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestTokenizeThroughRouterToWorker: the router reaches a real server
// configured as a PD worker (leg keys set, so /tokenize needs the cluster
// credential) and gets its answer; the worker refuses the same request
// without the credential.
func TestTokenizeThroughRouterToWorker(t *testing.T) {
	keys, err := leg.NewKeys([]byte("router-test-cluster-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	tok := byteVocab(t)
	workers := map[string]*httptest.Server{}
	for _, role := range []string{"prefill", "decode"} {
		pd := http.NewServeMux()
		pd.HandleFunc("GET /pd/status", func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(pool.Status{Role: role})
		})
		pd.HandleFunc("GET /pd/info", func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(pool.Info{Role: role, TransferAddr: "127.0.0.1:9", Model: "m"})
		})
		s := server.New(tokenOnlyBackend{tok}, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Registry: prometheus.NewRegistry(), LegKeys: keys, Mounts: map[string]http.Handler{"/pd/": keys.RequireCredential(pd)}})
		s.SetReady(true)
		workers[role] = httptest.NewServer(s.Handler())
		t.Cleanup(workers[role].Close)
	}
	c := newCluster(t, nil, nil, func(o *router.Options) {
		o.Prefill, o.Decode, o.LegKeys = []string{workers["prefill"].URL}, []string{workers["decode"].URL}, keys
	})

	status, body := c.post(t, "/tokenize", `{"model":"m","prompt":"Hi!","return_token_strs":true}`)
	var r server.TokenizeResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil || status != 200 {
		t.Fatalf("POST /tokenize through the router = %d %s (%v), want 200", status, body, err)
	}
	if want := tok.Encode("Hi!", true, true); !reflect.DeepEqual(r.Tokens, want) || r.Count != len(want) || r.MaxModelLen != 128 ||
		!reflect.DeepEqual(r.TokenStrs, []string{"<s>", "▁", "H", "i", "!"}) {
		t.Errorf("tokenize = %+v, want tokens %v, max_model_len 128 and token_strs", r, want)
	}
	ids, _ := json.Marshal(map[string]any{"tokens": r.Tokens})
	if status, body := c.post(t, "/detokenize", string(ids)); status != 200 || body != `{"prompt":"\u003cs\u003eHi!"}`+"\n" {
		t.Errorf("POST /detokenize through the router = %d %q, want 200 and <s>Hi!", status, body)
	}
	if status, body := c.post(t, "/detokenize", `{"tokens":[100000]}`); status != 400 {
		t.Errorf("POST /detokenize of a bad id through the router = %d %s, want the worker's 400", status, body)
	}

	resp, err := http.Post(workers["decode"].URL+"/tokenize", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /tokenize to the worker without the credential = %d, want 401", resp.StatusCode)
	}
}
