package harmony

import (
	"fmt"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
)

// Grammar builds the grammar of a gpt-oss answer that must call a tool
// (tool_choice required, or a named function), for a prompt that ends with
// the generation prompt "<|start|>assistant": an optional analysis message
// (reasoning without "<|"), then one call on the commentary channel,
//
//	<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS
//
// with ARGS following the tool's parameters schema (any object without
// one). Harmony writes one call per message and the turn ends with it, so
// there is exactly one call; generation stops when the arguments are done.
// The parser reads every text the grammar accepts back as that call. A
// schema the grammar cannot honour, or a named function not among tools, is
// an error naming the tool.
func Grammar(tools []openai.Tool, choice openai.Choice, opts grammar.Options) (*grammar.Grammar, error) {
	var alts []grammar.Part
	for _, t := range tools {
		if choice.Mode == openai.ChoiceFunction && t.Name != choice.Name {
			continue
		}
		schema := []byte(`{"type":"object","additionalProperties":true}`)
		if t.Parameters != nil {
			schema = t.Parameters
		}
		alts = append(alts, grammar.Seq(grammar.Lit(t.Name+" "+markConstrain+"json"+markMessage), grammar.Schema(schema)))
	}
	if len(alts) == 0 {
		return nil, fmt.Errorf("no function named %q was specified in the 'tools' parameter", choice.Name)
	}
	analysis := grammar.Seq(grammar.Lit(markChannel+ChannelAnalysis+markMessage), grammar.Regex(`([^<]|<[^|])*`),
		grammar.Lit(markEnd+markStart+"assistant"))
	top := grammar.Seq(grammar.Optional(analysis), grammar.Lit(markChannel+ChannelCommentary+" to=functions."), grammar.Alt(alts...))
	return grammar.CompileParts(top, opts)
}
