package worker

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/grammar"
	"tandem/internal/engine/sample"
	"tandem/internal/pd/room"
	"tandem/internal/server"
)

// TestConstrainedMatchesColocated: a grammar-constrained request through a
// prefill and a decode worker, each compiling the grammar from its own copy
// of the request (as each leg gets the body), gives exactly the colocated
// tokens: the prefill worker samples the first token under the grammar and
// the decode worker replays it into its matcher (and skips its draw) before
// continuing. JSON schema and regex, greedy and seeded sampling.
func TestConstrainedMatchesColocated(t *testing.T) {
	pp := newPair(t, 32)
	const schema = `{"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":999},
		"tag":{"enum":["red","green","blue"]},"note":{"type":"string","maxLength":5}},
		"required":["id","tag","note"],"additionalProperties":false}`
	compile := map[string]func() (*grammar.Grammar, error){
		"schema": func() (*grammar.Grammar, error) {
			return grammar.Compile([]byte(schema), grammar.Options{DisableAnyWhitespace: true})
		},
		"regex": func() (*grammar.Grammar, error) {
			return grammar.CompileRegex(`[a-f]{3,6}(-[0-9]{2}){1,3}`, grammar.Options{})
		},
	}
	check := map[string]func(string) bool{
		"schema": func(s string) bool {
			var v map[string]any
			return json.Unmarshal([]byte(s), &v) == nil && len(v) == 3
		},
		"regex": regexp.MustCompile(`^[a-f]{3,6}(-[0-9]{2}){1,3}$`).MatchString,
	}
	text := func(ids []int32) string {
		var b []byte
		for _, id := range ids {
			if !pp.m.Tokenizer.IsEOG(id) {
				b = append(b, pp.m.Tokenizer.TokenPiece(id)...)
			}
		}
		return string(b)
	}
	for _, kind := range []string{"schema", "regex"} {
		for i, sp := range []sample.Params{{}, {Temperature: 1, Seed: 3}, {Temperature: 0.8, TopK: 40, Seed: 11}} {
			gram := func() *grammar.Grammar {
				g, err := compile[kind]()
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			p := prompt(5 + 23*i)
			// min_tokens 2 rides along: the prefill side clamps it to its
			// one token, which it still applies.
			req := engine.Request{Prompt: p, MaxTokens: 100, Sample: sp, MinTokens: 2}
			req.Grammar = gram()
			h, err := pp.de.Submit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want, wl := drain(t, server.Stream(h))
			if wl.Finish != engine.FinishStop || !check[kind](text(want)) {
				t.Fatalf("%s %+v colocated: %q finish %q (the test needs a finished document)", kind, sp, text(want), wl.Finish)
			}
			id := newRoomID()
			dreq, preq := req, req
			dreq.Grammar, preq.Grammar = gram(), gram()
			pleg, dleg := pp.legs(id)
			ds, err := pp.d.SubmitLeg(context.Background(), dleg, dreq)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := pp.p.SubmitLeg(context.Background(), pleg, preq)
			if err != nil {
				t.Fatal(err)
			}
			got, dl := drain(t, ds)
			pid, _ := drain(t, ps)
			if !slices.Equal(got, want) || dl.Finish != wl.Finish {
				t.Errorf("%s %+v: disaggregated %q (%s), colocated %q (%s)", kind, sp, text(got), dl.Finish, text(want), wl.Finish)
			}
			if len(pid) != 1 || pid[0] != want[0] {
				t.Errorf("%s %+v: prefill's first token %v, colocated %d", kind, sp, pid, want[0])
			}
			for _, w := range []*Worker{pp.p, pp.d} {
				if st, _, _ := w.roomState(id); st != room.StateSucceeded {
					t.Errorf("%s %+v: %s room state %v, want succeeded", kind, sp, w.role.String(), st)
				}
			}
		}
	}
}
