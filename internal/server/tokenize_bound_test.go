package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestTokenizeBounded is finding 5 of the 2026-12-03 red-team run: an
// 8 MB prompt of digits (one token a digit) made a worker build 8 M
// tokens, their strings and a 56 MB answer. /tokenize now counts at most
// twice the model's context (or the caller's max_count, if less) and
// takes at most 16 bytes a token of that; /detokenize as many ids.
func TestTokenizeBounded(t *testing.T) {
	tok := testVocab(t, chatMLTemplate, true)
	b := newFake(t, tok)
	b.cfg.Context = 64 // the cap: 128 tokens, 2048 bytes
	s, _ := newTestServer(t, b, Options{})
	h := s.Handler()
	prompt := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	type want struct {
		status int
		param  string
		text   string
	}
	digits := func(n int) string { return strings.Repeat("7", n) }
	for _, tc := range []struct {
		name, path, body string
		want             want
	}{
		{"a prompt under the caps", "/tokenize", `{"prompt":` + prompt("a b") + `}`, want{200, "", ""}},
		{"a prompt over the byte cap", "/tokenize", `{"prompt":` + prompt(digits(4<<20)) + `}`, want{400, "prompt", "2048 bytes"}},
		{"messages over the byte cap", "/tokenize", `{"messages":[{"role":"user","content":` + prompt(digits(3000)) + `}]}`, want{400, "messages", "2048 bytes"}},
		{"a prompt over the token cap", "/tokenize", `{"prompt":` + prompt(strings.Repeat("a ", 300)) + `}`, want{400, "prompt", "more than 128 tokens"}},
		{"max_count below the count", "/tokenize", `{"prompt":` + prompt(strings.Repeat("a ", 20)) + `,"max_count":5}`, want{400, "prompt", "more than 5 tokens"}},
		{"max_count above the cap", "/tokenize", `{"prompt":"a","max_count":129}`, want{400, "max_count", "1 to 128"}},
		{"max_count zero", "/tokenize", `{"prompt":"a","max_count":0}`, want{400, "max_count", "1 to 128"}},
		{"max_count at the count", "/tokenize", `{"prompt":"a a","max_count":` + fmt.Sprint(len(tok.Encode("a a", true, true))) + `}`, want{200, "", ""}},
		{"detokenize over the cap", "/detokenize", `{"tokens":[` + strings.TrimSuffix(strings.Repeat("3,", 129), ",") + `]}`, want{400, "tokens", "at most 128"}},
		{"a completion prompt over the byte cap", "/v1/completions", `{"prompt":` + prompt(digits(4<<20)) + `,"max_tokens":1}`, want{400, "prompt", "more than 2048 (16 bytes a token"}},
		{"a completion prompt list over the byte cap", "/v1/completions", `{"prompt":["a",` + prompt(digits(3000)) + `],"max_tokens":1}`, want{400, "prompt[1]", "3000 bytes of text"}},
		{"detokenize at the cap", "/detokenize", `{"tokens":[` + strings.TrimSuffix(strings.Repeat("3,", 128), ",") + `]}`, want{200, "", ""}},
	} {
		rec := do(h, "POST", tc.path, tc.body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Param   *string `json:"param"`
				Code    string  `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != tc.want.status || deref(e.Error.Param) != tc.want.param || !strings.Contains(e.Error.Message, tc.want.text) {
			t.Errorf("%s: %d %s, want %d param %q with %q", tc.name, rec.Code, clip(rec.Body.String()), tc.want.status, tc.want.param, tc.want.text)
		}
		if rec.Code == http.StatusBadRequest && tc.path == "/v1/completions" && e.Error.Code != "context_length_exceeded" {
			t.Errorf("%s: code %q, want context_length_exceeded", tc.name, e.Error.Code)
		}
		if rec.Code == 200 && tc.path == "/tokenize" {
			var r TokenizeResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Count != len(r.Tokens) || r.Count == 0 {
				t.Errorf("%s: answer %s", tc.name, rec.Body)
			}
		}
		if rec.Code == http.StatusBadRequest && strings.Contains(tc.want.text, "tokens") && e.Error.Code != "context_length_exceeded" && tc.want.param == "prompt" {
			t.Errorf("%s: code %q, want context_length_exceeded", tc.name, e.Error.Code)
		}
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// TestTokenizeAdmission: /tokenize and /detokenize are worked on
// MaxTokenize at a time; tokenizeQueueFactor times as many more wait (each
// at most tokenizeWait, or until its client leaves), and the rest get 429
// with Retry-After at once, before their body is read.
func TestTokenizeAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tok := testVocab(t, "", true)
		s, _ := newTestServer(t, newFake(t, tok), Options{MaxTokenize: 1})
		h := s.Handler()
		if err := s.tokenizer.acquire(context.Background()); err != nil { // a request being tokenized
			t.Fatal(err)
		}
		codes := make(chan int, 8)
		for i := range tokenizeQueueFactor {
			path, body := "/tokenize", `{"prompt":"Hello"}`
			if i%2 == 1 {
				path, body = "/detokenize", `{"tokens":[1]}`
			}
			go func() { codes <- do(h, "POST", path, body).Code }()
		}
		synctest.Wait()
		if len(codes) != 0 {
			t.Fatalf("a queued request was answered (%d) while the slot was taken", <-codes)
		}
		unread := &countingReader{r: strings.NewReader(`{"prompt":"Hello"}`)}
		req := httptest.NewRequest("POST", "/tokenize", unread)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || unread.n != 0 {
			t.Errorf("a request beyond the queue: %d, Retry-After %q, %d body bytes read; want 429, 1 and none: %s",
				rec.Code, rec.Header().Get("Retry-After"), unread.n, rec.Body)
		}
		s.tokenizer.release()
		for range tokenizeQueueFactor {
			if c := <-codes; c != 200 {
				t.Errorf("a queued request: %d, want 200 once the slot is free", c)
			}
		}

		// A queued request waits tokenizeWait at most.
		s.tokenizer.acquire(context.Background())
		go func() { codes <- do(h, "POST", "/tokenize", `{"prompt":"Hello"}`).Code }()
		time.Sleep(tokenizeWait - time.Millisecond)
		synctest.Wait()
		if len(codes) != 0 {
			t.Fatalf("the queued request was answered before tokenizeWait")
		}
		time.Sleep(2 * time.Millisecond)
		if c := <-codes; c != http.StatusTooManyRequests {
			t.Errorf("a request queued for tokenizeWait: %d, want 429", c)
		}
		// A client that leaves stops waiting.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			req := httptest.NewRequestWithContext(ctx, "POST", "/tokenize", strings.NewReader(`{"prompt":"Hello"}`))
			h.ServeHTTP(httptest.NewRecorder(), req)
			close(done)
		}()
		synctest.Wait()
		cancel()
		<-done
		if waiting := s.tokenizer.waiting.Load(); waiting != 0 {
			t.Errorf("%d requests still counted as waiting", waiting)
		}
		s.tokenizer.release()
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
