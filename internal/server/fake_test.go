package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
	"tandem/internal/engine/tokenizer"
)

// testVocab is a small SentencePiece vocabulary: specials, the 256 byte
// tokens, printable ASCII characters and a few words. Generated text is
// scripted by token text (see tokenIDs), so the pieces only need to exist.
func testVocab(t testing.TB, chatTemplate string, withIMEnd bool) *tokenizer.Tokenizer {
	t.Helper()
	v := &tokenizer.Vocab{Model: "llama", BOS: 1, EOS: 2, EOT: -1, EOM: -1, UNK: 0, PAD: -1, SEP: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
		AddBOS: true, AddSpacePrefix: true, ChatTemplate: chatTemplate}
	add := func(s string, typ tokenizer.TokenType, score float32) {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, score)
	}
	add("<unk>", tokenizer.TypeUnknown, 0)
	add("<s>", tokenizer.TypeControl, 0)
	add("</s>", tokenizer.TypeControl, 0)
	add("<|im_start|>", tokenizer.TypeControl, 0)
	if withIMEnd {
		add("<|im_end|>", tokenizer.TypeControl, 0)
	}
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokenizer.TypeByte, 0)
	}
	add("▁", tokenizer.TypeNormal, -1)
	for c := byte(33); c < 127; c++ {
		add(string(c), tokenizer.TypeNormal, -2)
	}
	for i, w := range []string{"▁Hello", "▁world", "▁the", "ST", "TO", "OP", "▁STOP", "é"} {
		add(w, tokenizer.TypeNormal, float32(-i)/10)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatalf("tokenizer.New(test vocab) error: %v", err)
	}
	return tok
}

// tokenIDs maps token texts to ids ("<0xF0>" for byte tokens).
func tokenIDs(t testing.TB, tok *tokenizer.Tokenizer, texts ...string) []int32 {
	t.Helper()
	ids := make([]int32, len(texts))
	for i, s := range texts {
		found := false
		for id, x := range tok.Vocab().Tokens {
			if x == s {
				ids[i], found = int32(id), true
				break
			}
		}
		if !found {
			t.Fatalf("token %q is not in the test vocabulary", s)
		}
	}
	return ids
}

// script is what one fake stream emits: each entry is one Update. If the
// last update is not Done the stream then blocks until cancelled.
type script []engine.Update

// tokens builds updates of one token each, from token texts, with logprobs
// -0.5, -1, -1.5, ... and two alternatives per token when top > 0.
func tokens(t testing.TB, tok *tokenizer.Tokenizer, top int, texts ...string) []engine.Update {
	t.Helper()
	ids := tokenIDs(t, tok, texts...)
	alt := tokenIDs(t, tok, "a", "b")
	var ups []engine.Update
	for i, id := range ids {
		tk := engine.Token{ID: id, Logprob: -0.5 * float32(i+1)}
		for j := 0; j < top && j < len(alt); j++ {
			tk.Top = append(tk.Top, sample.TokenLogprob{ID: alt[j], Logprob: -float32(j + 1)})
		}
		ups = append(ups, engine.Update{Tokens: []engine.Token{tk}})
	}
	return ups
}

func done(reason engine.FinishReason) engine.Update {
	return engine.Update{Done: true, Finish: reason}
}

type fakeStream struct {
	req       engine.Request
	ups       []engine.Update
	mu        sync.Mutex
	pos       int
	eof       bool
	cancelled chan struct{}
	once      sync.Once
	endless   []engine.Token
}

func (s *fakeStream) Next(ctx context.Context) (engine.Update, error) {
	s.mu.Lock()
	if s.eof {
		s.mu.Unlock()
		return engine.Update{}, io.EOF
	}
	if s.pos < len(s.ups) {
		u := s.ups[s.pos]
		s.pos++
		if u.Done {
			s.eof = true
		}
		u.PromptTokens = len(s.req.Prompt)
		s.mu.Unlock()
		return u, nil
	}
	s.mu.Unlock()
	if s.endless != nil && !s.wasCancelled() {
		return engine.Update{Tokens: s.endless, PromptTokens: len(s.req.Prompt)}, nil
	}
	select {
	case <-ctx.Done():
		return engine.Update{}, ctx.Err()
	case <-s.cancelled:
		s.mu.Lock()
		s.eof = true
		s.mu.Unlock()
		return engine.Update{Done: true, Finish: engine.FinishCancelled, PromptTokens: len(s.req.Prompt)}, nil
	}
}

func (s *fakeStream) Cancel() { s.once.Do(func() { close(s.cancelled) }) }

func (s *fakeStream) wasCancelled() bool {
	select {
	case <-s.cancelled:
		return true
	default:
		return false
	}
}

// fakeBackend emits scripted updates. scripts[i] is the i-th submitted
// stream's script (the last one repeats).
type fakeBackend struct {
	tok       *tokenizer.Tokenizer
	cfg       model.Config
	scripts   []script
	submitErr error
	failAfter int // with submitErr: the first failAfter submissions succeed
	panicking bool
	endless   []engine.Token // when set, streams emit these tokens in every update until cancelled

	mu      sync.Mutex
	streams []*fakeStream
	subm    chan *fakeStream // each submitted stream, when not nil
}

func newFake(t testing.TB, tok *tokenizer.Tokenizer, scripts ...script) *fakeBackend {
	return &fakeBackend{tok: tok, cfg: model.Config{Name: "test-model", Context: 64, Vocab: tok.VocabSize()}, scripts: scripts}
}

func (b *fakeBackend) Submit(ctx context.Context, req engine.Request) (Stream, error) {
	if b.panicking {
		panic("fake backend panics on purpose")
	}
	b.mu.Lock()
	if b.submitErr != nil && len(b.streams) >= b.failAfter {
		b.mu.Unlock()
		return nil, b.submitErr
	}
	i := min(len(b.streams), len(b.scripts)-1)
	s := &fakeStream{req: req, cancelled: make(chan struct{}), endless: b.endless}
	if i >= 0 {
		s.ups = b.scripts[i]
	}
	b.streams = append(b.streams, s)
	b.mu.Unlock()
	if b.subm != nil {
		b.subm <- s
	}
	return s, nil
}

func (b *fakeBackend) Stats() engine.Stats {
	return engine.Stats{Waiting: 1, Running: 2, PagesUsed: 3, PagesEvictable: 1, PagesTot: 40, PrefixHitTokens: 5, PromptTokens: 6,
		GeneratedTokens: 7, Preemptions: 8, Steps: 9, StateSlotsUsed: 10, StateSlotsTot: 11, StateSnapshots: 12, StateSnapshotHits: 13,
		StateSnapshotMisses: 14}
}
func (b *fakeBackend) ModelConfig() model.Config       { return b.cfg }
func (b *fakeBackend) Tokenizer() *tokenizer.Tokenizer { return b.tok }

func (b *fakeBackend) submitted() []*fakeStream {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*fakeStream(nil), b.streams...)
}

// newTestServer returns a ready server over b with a fresh registry. With
// LegKeys and no Legs, b serves the legs too: as Legs if it is one, else
// through its Submit (backendLegs).
func newTestServer(t testing.TB, b Backend, o Options) (*Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o.Registry = reg
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.LegKeys != nil && o.Legs == nil {
		if l, ok := b.(Legs); ok {
			o.Legs = l
		} else {
			o.Legs = backendLegs{b}
		}
	}
	s := New(b, o)
	s.SetReady(true)
	return s, reg
}

// backendLegs serves legs on a Backend's Submit, for tests that look only
// at what reached the engine.
type backendLegs struct{ b Backend }

func (l backendLegs) SubmitLeg(ctx context.Context, _ leg.Info, req engine.Request) (Stream, error) {
	return l.b.Submit(ctx, req)
}

// do sends one request to h and returns the recorded response.
func do(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
