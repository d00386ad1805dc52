package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tandem/internal/modelhub/hubtest"
)

// TestUpModelFromHub is the README's newcomer flow: `tandem up --model
// hf.co/ORG/REPO:QUANT` with $HF_ENDPOINT pointed at a fake hub (hubtest:
// model API, redirect to a CDN, ETag hashes) that serves the synthesized
// tiny model. up pulls the file once into $TANDEM_HOME (one CDN download,
// not one per worker), the cluster serves it, greedy output equals `tandem
// generate` on the local file, and `tandem models` lists the reference.
func TestUpModelFromHub(t *testing.T) {
	setup(t)
	data, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	hub := hubtest.New(t)
	hub.AddFile("org/tiny-GGUF", "tiny-Q4_K_M.gguf", []byte("not this one"))
	hub.AddFile("org/tiny-GGUF", "tiny-Q8_0.gguf", data)
	hub.AddName("org/tiny-GGUF", "README.md")
	home := t.TempDir()
	t.Setenv("TANDEM_HOME", home)
	t.Setenv("HF_ENDPOINT", hub.Hub.URL)
	t.Setenv("HF_TOKEN", "")

	const prompt = "Once upon a time"
	var local struct {
		Text string `json:"text"`
	}
	out := runTandem(t, 2*time.Minute, "generate", "--model", modelPath, "--prompt", prompt, "--temperature", "0",
		"--max-tokens", "6", "--threads", "1", "--format", "json")
	if err := json.Unmarshal(out, &local); err != nil {
		t.Fatalf("tandem generate --format json: %v\n%s", err, out)
	}

	const ref = "hf.co/org/tiny-GGUF:Q8_0"
	port := freePort(t)
	base := startProcess(t, port, "up", "--model", ref, "--port", strconv.Itoa(port), "--threads", "1")
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"`+prompt+`","max_tokens":6,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion through up: %s %s", resp.Status, body)
	}
	var got struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &got); err != nil || len(got.Choices) != 1 {
		t.Fatalf("completion answer %s: %v", body, err)
	}
	if got.Choices[0].Text != local.Text {
		t.Errorf("greedy text through up --model %s = %q, tandem generate on the local file = %q", ref, got.Choices[0].Text, local.Text)
	}
	if st := hub.Stats(); st.CDNRequests != 1 {
		t.Errorf("up made %d CDN requests, want 1 (one pull, shared by the workers)", st.CDNRequests)
	}
	blobs, _ := filepath.Glob(filepath.Join(home, "blobs", "sha256-*"))
	if len(blobs) != 1 {
		t.Errorf("TANDEM_HOME blobs = %v, want the one pulled file", blobs)
	}
	if list := string(runTandem(t, time.Minute, "models")); !strings.Contains(list, ref) {
		t.Errorf("tandem models does not list %s:\n%s", ref, list)
	}
}
