package modelhub_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode"
	"unicode/utf8"

	"tandem/internal/modelhub"
	"tandem/internal/modelhub/hubtest"
)

// partials returns the partial files of h's cache and their sizes.
func partials(t *testing.T, h *modelhub.Hub) map[string]int64 {
	t.Helper()
	des, _ := os.ReadDir(filepath.Join(h.Dir, "partial"))
	out := map[string]int64{}
	for _, de := range des {
		if st, err := de.Info(); err == nil {
			out[de.Name()] = st.Size()
		}
	}
	return out
}

// TestPullBoundsUnannouncedLength is finding 8's endless body: a hub that
// announces no length and never ends its body wrote 400 MiB to partial/.
// With no length announced a download stops at MaxBytes and its partial
// file is deleted; a size the hub announces (X-Linked-Size, or the listing
// with ?blobs=true) is the limit instead, whatever MaxBytes says.
func TestPullBoundsUnannouncedLength(t *testing.T) {
	s, h, files := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang fails the test, not the run
	defer cancel()
	s.Endless(true)
	h.MaxBytes = 1 << 20
	_, err := h.Pull(ctx, "hf.co/"+repo+":Q8_0")
	if err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") || !strings.Contains(err.Error(), "no length") {
		t.Fatalf("endless body: err %v; want a refusal past MaxBytes saying no length was announced", err)
	}
	if p := partials(t, h); len(p) != 0 {
		t.Errorf("partial files left after an endless body: %v", p)
	}
	s.Endless(false)
	// Announced sizes override MaxBytes.
	h.MaxBytes = 1000
	e, err := h.Pull(ctx, "hf.co/"+repo+":Q8_0")
	if err != nil {
		t.Fatalf("a file the hub announces at 200000 bytes with MaxBytes 1000: %v", err)
	}
	checkBlob(t, e, files["model-Q8_0.gguf"])
	// A length only the CDN gives (Content-Length) must fit MaxBytes.
	s.NoLinkedSize(true)
	url := s.Hub.URL + "/" + repo + "/resolve/main/model-Q4_K_M.gguf"
	if _, err := h.Pull(ctx, url); err == nil || !strings.Contains(err.Error(), "300000 bytes") || !strings.Contains(err.Error(), "TANDEM_PULL_MAX_BYTES") {
		t.Fatalf("a 300000-byte CDN length above MaxBytes 1000 without the hub's size: err %v", err)
	}
	// ... unless the listing (?blobs=true) gives the size.
	e, err = h.Pull(ctx, "hf.co/"+repo+":Q4_K_M")
	if err != nil {
		t.Fatalf("the listing's size with MaxBytes 1000: %v", err)
	}
	checkBlob(t, e, files["model-Q4_K_M.gguf"])
}

// TestPullRefusesDrip is finding 8's drip: one byte every 20 s kept a pull
// alive for ever (each byte reset the 60 s stall watchdog). Fewer than
// MinRateBytes in a RateWindow now stop it, keeping the partial file for
// the next pull, which resumes.
func TestPullRefusesDrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, h, files := setupInMemory(t)
		s.DripNext(20 * time.Second)
		ref := "hf.co/" + repo + ":Q8_0"
		start := time.Now()
		_, err := h.Pull(context.Background(), ref)
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "too slow") || !strings.Contains(err.Error(), "resume") {
			t.Fatalf("drip: err %v after %v; want too slow, resumable", err, took)
		}
		if took > modelhub.DefaultRateWindow+time.Second {
			t.Errorf("the drip was refused after %v, want within the %v window", took, modelhub.DefaultRateWindow)
		}
		if p := partials(t, h); len(p) != 1 {
			t.Errorf("partial files after the drip: %v, want the one kept", p)
		}
		e, err := h.Pull(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		checkBlob(t, e, files["model-Q8_0.gguf"])
		if rg := s.Stats().Ranges; len(rg) != 2 || !strings.HasPrefix(rg[1], "bytes=") {
			t.Errorf("Range headers %q: the second pull should resume", rg)
		}
	})
}

// TestPullDeadline: a download still running after Timeout stops, with the
// partial file kept for the next pull.
func TestPullDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, h, _ := setupInMemory(t)
		s.DripNext(50 * time.Microsecond) // 20 KB/s: above the minimum rate, 10 s for the file
		h.Timeout = 5 * time.Second
		start := time.Now()
		_, err := h.Pull(context.Background(), "hf.co/"+repo+":Q8_0")
		if err == nil || !strings.Contains(err.Error(), "not done after 5s") || !strings.Contains(err.Error(), "resume") {
			t.Fatalf("slow download past the deadline: err %v", err)
		}
		if took := time.Since(start); took < 5*time.Second || took > 6*time.Second {
			t.Errorf("stopped after %v, want 5 s", took)
		}
		if p := partials(t, h); len(p) != 1 {
			t.Errorf("partial files: %v, want the one kept", p)
		}
	})
}

// TestPullEscapesHubText is finding 8's terminal injection: names and
// messages from the hub reach the terminal with their control characters
// escaped, and a long list of candidates is cut.
func TestPullEscapesHubText(t *testing.T) {
	s, h, _ := setup(t)
	evil := "a\x1b]0;PWNED\x07\x1b[2J\u202e-Q4_K_M.gguf"
	s.AddFile("org/evil", evil, payload(5000, 7))
	var shown []string
	h.Progress = func(p modelhub.Progress) { shown = append(shown, p.File) }
	ctx := context.Background()
	e, err := h.Pull(ctx, "hf.co/org/evil")
	if err != nil {
		t.Fatal(err)
	}
	if e.File != evil {
		t.Errorf("entry file %q, want the hub's name as it is (escaped only when shown)", e.File)
	}
	for _, f := range shown {
		if strings.ContainsAny(f, "\x1b\x07\u202e") || !strings.Contains(f, `\x1b]0;PWNED\x07`) {
			t.Errorf("progress shows the file as %q, want control characters escaped", f)
		}
	}
	if got := modelhub.Printable(evil); got != `a\x1b]0;PWNED\x07\x1b[2J\u202e-Q4_K_M.gguf` {
		t.Errorf("Printable(%q) = %q", evil, got)
	}
	clean := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		if m := err.Error(); strings.ContainsAny(m, "\x1b\x07\u202e\r") {
			t.Errorf("%s: the error carries raw control characters: %q", what, m)
		}
	}
	s.FailNext(http.StatusForbidden, "\x1b[31mdenied\x1b[0m\r\x1b[2K"+strings.Repeat("x", 400))
	_, err = h.Pull(ctx, "hf.co/org/evil")
	clean("the hub's error message", err)
	if err != nil && (!strings.Contains(err.Error(), `\x1b[31mdenied`) || len(err.Error()) > 2000) {
		t.Errorf("the hub's error message shown as %q (%d bytes): want it escaped and cut", err, len(err.Error()))
	}
	for i := range 5000 {
		s.AddName("org/many", "m"+strings.Repeat("\x1b", i%3)+"-"+strconv.Itoa(i)+".gguf")
	}
	_, err = h.Pull(ctx, "hf.co/org/many")
	clean("a list of 5000 candidates", err)
	if err != nil && (len(err.Error()) > 4000 || !strings.Contains(err.Error(), "and 4980 more")) {
		t.Errorf("a list of 5000 candidates: %d bytes, ends %q; want the first 20 and a count", len(err.Error()), tail(err.Error()))
	}
	_, err = h.Pull(ctx, "hf.co/org/many:Q9_X")
	clean("no file tagged", err)
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}

// setupInMemory is setup over hubtest.NewInMemory, for synctest bubbles.
func setupInMemory(t *testing.T) (*hubtest.Server, *modelhub.Hub, map[string][]byte) {
	t.Helper()
	s := hubtest.NewInMemory(t)
	files := map[string][]byte{"model-Q8_0.gguf": payload(200_000, 2)}
	for n, b := range files {
		s.AddFile(repo, n, b)
	}
	return s, &modelhub.Hub{Endpoint: s.Hub.URL, Dir: t.TempDir(), Client: s.Client()}, files
}

// FuzzPrintable: whatever the hub sends, Printable's output is valid UTF-8
// without a character a terminal acts on, and a clean string is kept.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"model-Q4_K_M.gguf", "a\x1b]0;x\x07", "\u202egguf", "\xff\xfe", `back\slash`, "tab\there", "\u0085\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := modelhub.Printable(s)
		if !utf8.ValidString(p) {
			t.Fatalf("Printable(%q) = %q is not UTF-8", s, p)
		}
		for _, r := range p {
			if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
				t.Fatalf("Printable(%q) = %q keeps %U", s, p, r)
			}
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
			return r == '\\' || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
		}) && p != s {
			t.Fatalf("Printable(%q) = %q changed a clean string", s, p)
		}
	})
}
