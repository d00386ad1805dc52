package modelhub_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"tandem/internal/modelhub"
	"tandem/internal/modelhub/hubtest"
)

const repo = "org/model-GGUF"

func payload(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// setup returns a fake hub with one repository of two quantizations and a Hub
// that pulls from it into a fresh folder with token "tok".
func setup(t *testing.T) (*hubtest.Server, *modelhub.Hub, map[string][]byte) {
	t.Helper()
	s := hubtest.New(t)
	files := map[string][]byte{
		"model-Q4_K_M.gguf": payload(300_000, 1),
		"model-Q8_0.gguf":   payload(200_000, 2),
	}
	for n, b := range files {
		s.AddFile(repo, n, b)
	}
	s.AddName(repo, "README.md")
	return s, &modelhub.Hub{Endpoint: s.Hub.URL, Token: "tok", Dir: t.TempDir()}, files
}

func checkBlob(t *testing.T, e modelhub.Entry, want []byte) {
	t.Helper()
	got, err := os.ReadFile(e.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("blob %s: %d bytes, not the file's %d", e.Path, len(got), len(want))
	}
	if e.SHA256 != sha(want) || e.Size != int64(len(want)) || filepath.Base(e.Path) != "sha256-"+sha(want) {
		t.Fatalf("entry %+v does not describe the content (sha256 %s, %d bytes)", e, sha(want), len(want))
	}
}

func TestPullQuantCaseInsensitiveTokenOnlyToHub(t *testing.T) {
	s, h, files := setup(t)
	var last modelhub.Progress
	h.Progress = func(p modelhub.Progress) { last = p }
	e, err := h.Pull(context.Background(), "huggingface.co/"+repo+":q8_0")
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, files["model-Q8_0.gguf"])
	if e.Reference != "hf.co/"+repo+":Q8_0" || e.File != "model-Q8_0.gguf" || e.Revision != "main" {
		t.Fatalf("entry %+v", e)
	}
	if !last.Final || last.Done != e.Size || last.Total != e.Size {
		t.Fatalf("last progress %+v, want final with %d of %d", last, e.Size, e.Size)
	}
	st := s.Stats()
	for _, a := range st.HubAuth {
		if a != "Bearer tok" {
			t.Fatalf("hub got Authorization %q, want the token", a)
		}
	}
	if st.CDNRequests != 1 || st.CDNAuth[0] != "" {
		t.Fatalf("CDN: %d requests, Authorization %q; want 1 request and no token", st.CDNRequests, st.CDNAuth)
	}
	if _, err := os.Stat(filepath.Join(h.Dir, "partial")); err == nil {
		if des, _ := os.ReadDir(filepath.Join(h.Dir, "partial")); len(des) != 0 {
			t.Fatalf("partial files left: %v", des)
		}
	}
}

func TestPullDefaultQuant(t *testing.T) {
	_, h, files := setup(t)
	e, err := h.Pull(context.Background(), "hf.co/"+repo)
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, files["model-Q4_K_M.gguf"])
}

// TestPullResumesAfterCut: with retries off, a cut download fails keeping
// its partial file, and the next Pull resumes it.
func TestPullResumesAfterCut(t *testing.T) {
	s, h, files := setup(t)
	h.Retries = -1
	s.CutNext(100_000)
	ref := "hf.co/" + repo + ":Q4_K_M"
	_, err := h.Pull(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), "run the same pull again to resume") {
		t.Fatalf("cut download: err %v, want a resumable failure", err)
	}
	want := files["model-Q4_K_M.gguf"]
	part := filepath.Join(h.Dir, "partial", "sha256-"+sha(want)+".partial")
	st, statErr := os.Stat(part)
	if statErr != nil || st.Size() != 100_000 {
		t.Fatalf("partial file after the cut: %v, %v; want 100000 bytes", st, statErr)
	}
	var last modelhub.Progress
	h.Progress = func(p modelhub.Progress) { last = p }
	e, err := h.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, want)
	rg := s.Stats().Ranges
	if len(rg) != 2 || rg[0] != "" || rg[1] != "bytes=100000-" {
		t.Fatalf("CDN Range headers %q, want none then bytes=100000-", rg)
	}
	if last.Resumed != 100_000 || last.Done != int64(len(want)) {
		t.Fatalf("progress %+v, want resumed from 100000", last)
	}
	if _, err := os.Stat(part); err == nil {
		t.Fatal("the partial file is still there after the resumed download")
	}
}

func TestPullRestartsWhenRangeIgnored(t *testing.T) {
	s, h, files := setup(t)
	h.Retries = -1
	s.CutNext(50_000)
	ref := "hf.co/" + repo + ":Q8_0"
	if _, err := h.Pull(context.Background(), ref); err == nil {
		t.Fatal("cut download succeeded")
	}
	s.NoRange(true)
	e, err := h.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, files["model-Q8_0.gguf"])
	if rg := s.Stats().Ranges; len(rg) != 2 || rg[1] != "bytes=50000-" {
		t.Fatalf("Range headers %q: the second pull should have asked to resume", rg)
	}
}

func TestPullRefusesWrongHash(t *testing.T) {
	s, h, _ := setup(t)
	s.WrongHash(repo, "model-Q8_0.gguf")
	_, err := h.Pull(context.Background(), "hf.co/"+repo+":Q8_0")
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("err %v, want a sha256 mismatch", err)
	}
	if n := s.Stats().CDNRequests; n != 1 {
		t.Fatalf("a checksum mismatch made %d CDN requests; it is not retried", n)
	}
	for _, d := range []string{"blobs", "partial", "manifests"} {
		des, _ := os.ReadDir(filepath.Join(h.Dir, d))
		if len(des) != 0 {
			t.Fatalf("%s holds %d files after a refused download", d, len(des))
		}
	}
	if es, err := h.List(); err != nil || len(es) != 0 {
		t.Fatalf("List after a refused download: %v, %v", es, err)
	}
}

func TestSecondPullDownloadsNothing(t *testing.T) {
	s, h, files := setup(t)
	ctx := context.Background()
	ref := "hf.co/" + repo + ":Q4_K_M"
	if _, err := h.Pull(ctx, ref); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	e, err := h.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, files["model-Q4_K_M.gguf"])
	after := s.Stats()
	if after.CDNRequests != before.CDNRequests {
		t.Fatalf("the second pull made %d CDN requests", after.CDNRequests-before.CDNRequests)
	}
	// The same content under another reference is not downloaded again either.
	url := s.Hub.URL + "/" + repo + "/resolve/main/model-Q4_K_M.gguf"
	if e2, err := h.Pull(ctx, url); err != nil || e2.SHA256 != e.SHA256 {
		t.Fatalf("pull %s: %+v, %v", url, e2, err)
	}
	// Resolve of a cached reference asks nobody.
	if _, err := h.Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	final := s.Stats()
	if final.CDNRequests != before.CDNRequests || final.HubRequests != after.HubRequests+1 {
		t.Fatalf("requests: hub %d→%d→%d, CDN %d→%d; want one hub request (the URL pull) and no CDN request",
			before.HubRequests, after.HubRequests, final.HubRequests, before.CDNRequests, final.CDNRequests)
	}
	es, err := h.List()
	if err != nil || len(es) != 2 {
		t.Fatalf("List: %+v, %v; want 2 entries", es, err)
	}
	if es[0].Reference != "hf.co/"+repo+":Q4_K_M" || es[1].Reference != url || es[1].File != "model-Q4_K_M.gguf" {
		t.Fatalf("List: %+v", es)
	}
}

func TestPullFileURLs(t *testing.T) {
	s, h, files := setup(t)
	ctx := context.Background()
	// A huggingface.co URL is fetched from the configured endpoint.
	e, err := h.Pull(ctx, "https://huggingface.co/"+repo+"/resolve/main/model-Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, files["model-Q8_0.gguf"])
	if e.Reference != "hf.co/"+repo+"/resolve/main/model-Q8_0.gguf" {
		t.Fatalf("reference %q", e.Reference)
	}
	if _, err := h.Pull(ctx, "https://example.com/"+repo+"/resolve/main/model-Q8_0.gguf"); err == nil || !strings.Contains(err.Error(), "HF_ENDPOINT") {
		t.Fatalf("a URL on another host: err %v, want a refusal naming HF_ENDPOINT", err)
	}
	if _, err := h.Pull(ctx, s.Hub.URL+"/"+repo+"/resolve/main/README.md"); err == nil || !strings.Contains(err.Error(), "not a .gguf") {
		t.Fatalf("a README URL: err %v", err)
	}
}

func TestPullErrorsSayWhatToDo(t *testing.T) {
	s, h, _ := setup(t)
	s.AddFile("org/gated", "g-Q4_K_M.gguf", payload(1000, 3))
	s.RequireToken("org/gated", "secret")
	s.AddName("org/safetensors", "model.safetensors")
	s.AddFile("org/split", "big-Q4_K_M-00001-of-00002.gguf", payload(10, 4))
	s.AddName("org/split", "big-Q4_K_M-00002-of-00002.gguf")
	ctx := context.Background()
	cases := []struct{ ref, want string }{
		{"hf.co/org/gated", "set HF_TOKEN"},
		{"hf.co/org/missing", "check the repository name"},
		{"hf.co/org/safetensors", "has no .gguf file"},
		{"hf.co/org/split", "big-Q4_K_M-00001-of-00002.gguf, big-Q4_K_M-00002-of-00002.gguf is a split GGUF"},
		{"hf.co/" + repo + ":Q5_K_M", "model-Q8_0.gguf  (hf.co/" + repo + ":Q8_0)"},
		{s.Hub.URL + "/" + repo + "/resolve/main/model-Q2_K.gguf", "404"},
	}
	for _, c := range cases {
		_, err := h.Pull(ctx, c.ref)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pull %s: err %v; want it to contain %q", c.ref, err, c.want)
		}
	}
	h.Token = "secret"
	if _, err := h.Pull(ctx, "hf.co/org/gated"); err != nil {
		t.Fatalf("gated repo with its token: %v", err)
	}
	down := &modelhub.Hub{Endpoint: "http://127.0.0.1:1", Dir: t.TempDir()}
	if _, err := down.Pull(ctx, "hf.co/"+repo); err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1/api/models/"+repo) {
		t.Fatalf("unreachable hub: err %v, want it to name the URL", err)
	}
}

func TestPullGitBlobETag(t *testing.T) {
	// A small non-LFS file: the hub serves it itself with the git blob id as
	// its ETag.
	content := []byte("GGUF tiny, not LFS")
	mux := newGitHub(t, content)
	h := &modelhub.Hub{Endpoint: mux, Dir: t.TempDir()}
	e, err := h.Pull(context.Background(), mux+"/org/r/resolve/main/x.gguf")
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, content)
}

func TestPullGivesUpOnStall(t *testing.T) {
	s, h, files := setup(t)
	s.HangNext(1000)
	h.StallTimeout = 100 * time.Millisecond
	h.Retries = -1
	ref := "hf.co/" + repo + ":Q8_0"
	_, err := h.Pull(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), "nothing received for 100ms") || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("stalled download: err %v", err)
	}
	e, err := h.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, files["model-Q8_0.gguf"])
	if rg := s.Stats().Ranges; len(rg) != 2 || rg[1] != "bytes=1000-" {
		t.Fatalf("Range headers %q, want the second pull to resume from 1000", rg)
	}
}

// TestPullRetriesCutsInOneCall: a download cut twice is resumed twice
// within one Pull (Range from each cut's end) and verified.
func TestPullRetriesCutsInOneCall(t *testing.T) {
	s, h, files := setup(t)
	h.RetryWait = time.Millisecond
	s.CutNext(100_000)
	s.CutNext(50_000)
	var ps []modelhub.Progress
	h.Progress = func(p modelhub.Progress) {
		if p.Final {
			ps = append(ps, p)
		}
	}
	e, err := h.Pull(context.Background(), "hf.co/"+repo+":Q4_K_M")
	if err != nil {
		t.Fatalf("a download cut twice, with retries: %v", err)
	}
	checkBlob(t, e, files["model-Q4_K_M.gguf"])
	if rg := s.Stats().Ranges; len(rg) != 3 || rg[0] != "" || rg[1] != "bytes=100000-" || rg[2] != "bytes=150000-" {
		t.Fatalf("CDN Range headers %q, want none, bytes=100000-, bytes=150000-", rg)
	}
	if len(ps) != 3 || ps[1].Resumed != 100_000 || ps[2].Resumed != 150_000 || ps[2].Done != 300_000 {
		t.Fatalf("final progress of each attempt %+v", ps)
	}
	if p := partials(t, h); len(p) != 0 {
		t.Fatalf("partial files left: %v", p)
	}
}

// TestPullRetriesGiveUp: retries are bounded; the last error says so and
// the partial file stays for the next pull.
func TestPullRetriesGiveUp(t *testing.T) {
	s, h, files := setup(t)
	h.Retries, h.RetryWait = 2, time.Millisecond
	for range 3 {
		s.CutNext(10_000)
	}
	ref := "hf.co/" + repo + ":Q8_0"
	_, err := h.Pull(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), "gave up after 2 retries") || !strings.Contains(err.Error(), "run the same pull again to resume") {
		t.Fatalf("three cuts with two retries: err %v", err)
	}
	if p := partials(t, h); len(p) != 1 {
		t.Fatalf("partial files %v, want the one kept", p)
	} else {
		for _, n := range p {
			if n != 30_000 {
				t.Fatalf("partial file of %d bytes, want 30000", n)
			}
		}
	}
	e, err := h.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkBlob(t, e, files["model-Q8_0.gguf"])
	if rg := s.Stats().Ranges; len(rg) != 4 || rg[3] != "bytes=30000-" {
		t.Fatalf("Range headers %q", rg)
	}
}

// TestPullRetriesServerErrors: a 503 from the CDN is retried; a 404 is not.
func TestPullRetriesServerErrors(t *testing.T) {
	s, h, files := setup(t)
	h.RetryWait = time.Millisecond
	s.FailCDNNext(http.StatusServiceUnavailable)
	e, err := h.Pull(context.Background(), "hf.co/"+repo+":Q8_0")
	if err != nil {
		t.Fatalf("a 503 then the file: %v", err)
	}
	checkBlob(t, e, files["model-Q8_0.gguf"])
	if n := s.Stats().CDNRequests; n != 2 {
		t.Fatalf("%d CDN requests, want 2", n)
	}
	s.FailCDNNext(http.StatusNotFound)
	before := s.Stats().CDNRequests
	if _, err := h.Pull(context.Background(), "hf.co/"+repo+":Q4_K_M"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a 404: err %v", err)
	}
	if n := s.Stats().CDNRequests - before; n != 1 {
		t.Fatalf("a 404 made %d CDN requests; it is not retried", n)
	}
}

// TestPullRetryBackoff: the waits between retries double from RetryWait
// (default 1 s): three cuts take 1 + 2 + 4 s of waiting.
func TestPullRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, h, files := setupInMemory(t)
		for range 3 {
			s.CutNext(1000)
		}
		start := time.Now()
		e, err := h.Pull(context.Background(), "hf.co/"+repo+":Q8_0")
		if err != nil {
			t.Fatal(err)
		}
		checkBlob(t, e, files["model-Q8_0.gguf"])
		if took := time.Since(start); took != 7*time.Second {
			t.Fatalf("three retries took %v of fake time, want 7s (1+2+4)", took)
		}
	})
}

// TestRemove: rm takes the manifest, and the blob once no reference names
// it; a reference never pulled is an error.
func TestRemove(t *testing.T) {
	s, h, _ := setup(t)
	ctx := context.Background()
	a, err := h.Pull(ctx, "hf.co/"+repo+":Q4_K_M")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Pull(ctx, repo); err != nil { // the short form, same content
		t.Fatal(err)
	}
	e, blobGone, err := h.Remove(repo + ":q4_k_m")
	if err != nil || blobGone || e.SHA256 != a.SHA256 {
		t.Fatalf("remove one of two references: %+v, blob deleted %v, %v; want the blob kept", e, blobGone, err)
	}
	if _, err := os.Stat(a.Path); err != nil {
		t.Fatalf("blob still named by hf.co/%s is gone: %v", repo, err)
	}
	if _, blobGone, err = h.Remove("hf.co/" + repo); err != nil || !blobGone {
		t.Fatalf("remove the last reference: blob deleted %v, %v", blobGone, err)
	}
	if _, err := os.Stat(a.Path); err == nil {
		t.Fatal("the blob is still there")
	}
	if es, _ := h.List(); len(es) != 0 {
		t.Fatalf("List after rm: %+v", es)
	}
	if _, _, err := h.Remove(repo); err == nil || !strings.Contains(err.Error(), "tandem models") {
		t.Fatalf("remove twice: %v", err)
	}
	_ = s
}
