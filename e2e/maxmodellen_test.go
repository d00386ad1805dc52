package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMaxModelLen: a model whose context is 131072 tokens, started with
// --max-model-len 8192 (serve, and up's workers), allocates the KV cache
// for 8192 (4 sequences: 2048 pages of 16 tokens, where the model's
// context would take 32768), reports max_model_len 8192 on /v1/models and
// refuses a longer prompt with a 400 context_length_exceeded.
func TestMaxModelLen(t *testing.T) {
	setup(t)
	model := filepath.Join(t.TempDir(), "ctx128k.gguf")
	runTandem(t, 2*time.Minute, "model", "synth", "--preset", "tiny", "--context", "131072", "-o", model)

	var serveOut lockedBuffer
	sp := freePort(t)
	serve := startProcessOut(t, sp, &serveOut, &serveOut, "serve", "--model", model, "--port", strconv.Itoa(sp), "--threads", "1", "--max-model-len", "8192")
	var upOut lockedBuffer
	upPort := freePort(t)
	up := startProcessOut(t, upPort, &upOut, &upOut, "up", "--model", model, "--port", strconv.Itoa(upPort), "--threads", "1", "--max-model-len", "8192")

	pages := regexp.MustCompile(`msg=serving .*context=(\d+) .*kv_pages=(\d+) kv_bytes=(\d+)`)
	for name, out := range map[string]*lockedBuffer{"serve": &serveOut, "up": &upOut} {
		ms := pages.FindAllStringSubmatch(out.String(), -1)
		if len(ms) == 0 {
			t.Errorf("%s logged no serving line with context and kv_pages:\n%s", name, out.String())
		}
		for _, m := range ms {
			if m[1] != "8192" || m[2] != "2048" {
				t.Errorf("%s: a worker serves context %s with %s KV pages, want 8192 and 2048", name, m[1], m[2])
			}
			t.Logf("%s: context %s, kv_pages %s, kv_bytes %s", name, m[1], m[2], m[3])
		}
	}
	long := strings.Repeat("Once upon a time there was a cat. ", 1200) // about 9600 tokens
	for name, base := range map[string]string{"serve": serve, "up": up} {
		resp, err := http.Get(base + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		var ml struct {
			Data []struct {
				MaxModelLen int `json:"max_model_len"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&ml)
		resp.Body.Close()
		if err != nil || len(ml.Data) != 1 || ml.Data[0].MaxModelLen != 8192 {
			t.Errorf("%s /v1/models: %+v (%v), want max_model_len 8192", name, ml, err)
		}
		a, body := postRaw(t, base, badRequest{name: name + " long prompt", path: "/v1/completions", body: `{"prompt":"` + long + `","max_tokens":4}`})
		if a.Status != 400 || !strings.Contains(a.Error, "context_length_exceeded") || !strings.Contains(a.Error, "maximum context length is 8192 tokens") {
			t.Errorf("%s: a prompt over 8192 tokens got %d %s, want 400 context_length_exceeded naming 8192", name, a.Status, body)
		}
		t.Logf("%s: a prompt over 8192 tokens: %d %s", name, a.Status, strings.TrimSpace(body))
		ok, _ := postRaw(t, base, badRequest{name: name + " short prompt", path: "/v1/completions", body: `{"prompt":"Once upon a time","max_tokens":4}`})
		if ok.Status != 200 {
			t.Errorf("%s: a short prompt got %d", name, ok.Status)
		}
	}
}
