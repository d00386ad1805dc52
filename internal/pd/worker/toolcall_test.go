package worker

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/engine/grammar"
	"tandem/internal/engine/sample"
	"tandem/internal/server"
	"tandem/internal/server/toolcall"
)

// TestToolCallGrammarMatchesColocated: a required tool call (the Hermes
// tool grammar of package toolcall, as the server builds it for
// tool_choice "required") through a prefill and a decode worker gives
// exactly the colocated tokens, and they parse back to one call whose
// arguments follow the schema.
func TestToolCallGrammarMatchesColocated(t *testing.T) {
	pp := newPair(t, 32)
	tools, terr := openai.ParseTools(json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":
		{"type":"object","properties":{"city":{"type":"string","maxLength":8},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}},
		{"type":"function","function":{"name":"ping"}}]`))
	if terr != nil {
		t.Fatal(terr)
	}
	gram := func() *grammar.Grammar {
		g, e := toolcall.Grammar(toolcall.GrammarSpec{Format: toolcall.Hermes, Tools: tools,
			Choice: openai.Choice{Mode: openai.ChoiceFunction, Name: "get_weather"}, Options: grammar.Options{DisableAnyWhitespace: true}})
		if e != nil {
			t.Fatal(e)
		}
		return g
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
	for i, sp := range []sample.Params{{}, {Temperature: 1, Seed: 5}} {
		req := engine.Request{Prompt: prompt(7 + 19*i), MaxTokens: 120, Sample: sp, Grammar: gram()}
		h, err := pp.de.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want, wl := drain(t, server.Stream(h))
		r := toolcall.Parse(toolcall.Hermes, text(want))
		if wl.Finish != engine.FinishStop || len(r.Calls) != 1 || r.Content != "" || r.Calls[0].Name != "get_weather" {
			t.Fatalf("%+v colocated: %q finish %q parsed %+v (the test needs one finished call)", sp, text(want), wl.Finish, r)
		}
		var args struct{ City, Unit string }
		if err := json.Unmarshal([]byte(r.Calls[0].Arguments), &args); err != nil || len([]rune(args.City)) > 8 || (args.Unit != "c" && args.Unit != "f") {
			t.Fatalf("arguments %s break the schema (%v)", r.Calls[0].Arguments, err)
		}
		dreq, preq := req, req
		dreq.Grammar, preq.Grammar = gram(), gram()
		pctx, dctx := pp.legs(newRoomID())
		ds, err := pp.d.Backend().Submit(dctx, dreq)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := pp.p.Backend().Submit(pctx, preq)
		if err != nil {
			t.Fatal(err)
		}
		got, dl := drain(t, ds)
		drain(t, ps)
		if !slices.Equal(got, want) || dl.Finish != wl.Finish {
			t.Errorf("%+v: disaggregated %q (%s), colocated %q (%s)", sp, text(got), dl.Finish, text(want), wl.Finish)
		}
	}
}
