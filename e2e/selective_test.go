package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"tandem/internal/pd/debugdoc"
)

// TestSelectiveDisaggregation: with `tandem up --pd-threshold 64`, a short
// prompt runs as a local leg on the decode worker and one over 64 tokens
// is disaggregated; both give, token for token, what `tandem serve`
// gives, and the router's /debug/rooms shows each decision, with the
// phases of the disaggregated one.
func TestSelectiveDisaggregation(t *testing.T) {
	setup(t)
	serve := startServe(t, modelPath)
	up := startUp(t, modelPath, "--pd-threshold", "64")
	ps := prompts()
	for _, name := range []string{"short", "over-a-chunk"} {
		want, got := complete(t, serve, ps[name], true), complete(t, up, ps[name], true)
		if strings.Join(got.Tokens, "\x00") != strings.Join(want.Tokens, "\x00") || got.LPs == nil ||
			strings.Join(got.LPs, " ") != strings.Join(want.LPs, " ") {
			t.Errorf("%s prompt: through the router %q %v, serve %q %v", name, got.Tokens, got.LPs, want.Tokens, want.LPs)
		}
	}
	// A room ends once the router has read its decode leg to the end,
	// which may be just after the client got [DONE].
	var doc debugdoc.Rooms
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		b, err := debugGet(context.Background(), &http.Client{Timeout: time.Minute}, up+"/debug/rooms")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Rooms) == 2 && doc.Live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("router rooms: %s, want two that ended", b)
		}
	}
	long, short := doc.Rooms[0], doc.Rooms[1] // newest first
	if d := short.Decision; d == nil || d.Path != "local" || d.Reason != "short_prompt" || short.Prefill != "" || short.State != "succeeded" {
		t.Errorf("short prompt's room %+v (decision %+v), want a succeeded local one", short, d)
	}
	if d := long.Decision; d == nil || d.Path != "disaggregated" || d.Reason != "long_prompt" || long.Prefill == "" || long.State != "succeeded" {
		t.Errorf("long prompt's room %+v (decision %+v), want a succeeded disaggregated one", long, d)
	}
	if p := long.Phases; p == nil || p.TTFTMS == nil || p.QueueMS == nil || p.PrefillMS == nil || p.TransferMS == nil || p.FirstDecodeMS == nil {
		t.Errorf("disaggregated room's phases %+v, want TTFT, queue, prefill, transfer and first decode", p)
	}
}
