package loadgen

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc..."},
		{"aé", 2, "a..."}, // é is two bytes: never cut in half
		{"ééé", 3, "é..."},
	}
	for _, tc := range tests {
		if got := clip(tc.in, tc.n); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestIsTerminalPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("os.Pipe: %v", err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) {
		t.Errorf("isTerminal(pipe) = true, want false")
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Errorf("isTerminal(buffer) = true, want false")
	}
}

// TestStreamLastEventWithoutBlankLine: a server that closes right after
// its last data line, before the blank line that ends the event, still has
// that event read ([DONE] here); a stream cut inside a line is truncated,
// and comments and other fields are skipped.
func TestStreamLastEventWithoutBlankLine(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, body, kind string
	}{
		{"done without a blank line", ": ping\n\ndata: " + textChunk("a") + "\n\nevent: x\ndata: " + finishChunk + "\n\ndata: [DONE]\n", ""},
		{"done with crlf and no blank line", "data: " + textChunk("a") + "\r\n\r\ndata: [DONE]\r\n", ""},
		{"cut inside the done line", "data: " + textChunk("a") + "\n\ndata: [DO", kindTruncated},
		{"cut inside a chunk", "data: " + textChunk("a") + "\n\ndata: {\"choi", kindTruncated},
	} {
		r := readStream(ctx, ctx, strings.NewReader(tc.body), time.Now(), 4)
		if r.kind != tc.kind || (tc.kind == "" && r.outputTokens != 1) {
			t.Errorf("%s: kind %q (%s), %d output tokens; want kind %q", tc.name, r.kind, r.msg, r.outputTokens, tc.kind)
		}
	}
}
