package answer

import (
	"encoding/json"
	"fmt"
	"strconv"

	"tandem/internal/api/openai"
)

// Splice is what the router changes in one sample's answer from a decode
// worker, a whole document or one streamed chunk; everything else keeps
// its bytes.
type Splice struct {
	// ID, when not "", replaces the document's id (the merged answer's,
	// when a request's samples are merged).
	ID string
	// Reindex sets every choice's index to Index (the sample's place among
	// the request's choices: prompt*n + j).
	Reindex bool
	Index   int
	// PromptLogprobs, when not nil, becomes every choice's prompt_logprobs
	// (the prefill leg's; a decode worker cannot compute them). With Echo
	// (a completions request with echo and logprobs) the prompt's null
	// entries of the choice's legacy logprobs.token_logprobs are filled
	// from it too (FillEchoLogprobs).
	PromptLogprobs json.RawMessage
	Echo           bool
}

// Apply makes s's changes to o. The error is a choices member that is not
// an array of objects.
func (s Splice) Apply(o Object) (Object, error) {
	if s.ID != "" {
		o = o.Set("id", Quote(s.ID))
	}
	return EditChoices(o, func(_ int, c Object) Object {
		if s.Reindex {
			c = c.Set("index", json.RawMessage(strconv.Itoa(s.Index)))
		}
		if s.PromptLogprobs != nil {
			c = c.Set("prompt_logprobs", s.PromptLogprobs)
			if s.Echo {
				c = FillEchoLogprobs(c, s.PromptLogprobs)
			}
		}
		return c
	})
}

// PromptLogprobs returns choices[0].prompt_logprobs of a prefill leg's
// answer, or nil.
func PromptLogprobs(body []byte) json.RawMessage {
	var doc struct {
		Choices []struct {
			PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &doc) != nil || len(doc.Choices) == 0 || IsNull(doc.Choices[0].PromptLogprobs) {
		return nil
	}
	return doc.Choices[0].PromptLogprobs
}

// MergeDocs merges the samples' non-streamed answers, one choice each
// (already re-indexed), into one under id: the first answer's other
// members, all choices in sample order, and the usage summed as MergeUsage
// does (n samples to a prompt). The answer ends with a newline.
func MergeDocs(docs []Object, id string, n int) ([]byte, error) {
	var choices []json.RawMessage
	usages := make([]*openai.Usage, len(docs))
	for i, d := range docs {
		raw, ok := d.Get("choices")
		if !ok {
			return nil, fmt.Errorf("merge answers: sample %d has no choices", i)
		}
		items, err := ParseArray(raw)
		if err != nil {
			return nil, fmt.Errorf("merge answers: sample %d: %w", i, err)
		}
		choices = append(choices, items...)
		if raw, ok := d.Get("usage"); ok {
			var u openai.Usage
			if err := json.Unmarshal(raw, &u); err != nil {
				return nil, fmt.Errorf("merge answers: sample %d usage: %w", i, err)
			}
			usages[i] = &u
		}
	}
	out := docs[0].Set("id", Quote(id)).Set("choices", MarshalArray(choices))
	if u := MergeUsage(usages, n); u != nil {
		ub, err := json.Marshal(u)
		if err != nil {
			return nil, fmt.Errorf("merge answers: %w", err)
		}
		out = out.Set("usage", ub)
	}
	return append(out.Marshal(), '\n'), nil
}

// MergeUsage sums the samples' usage as `tandem serve` reports a request's:
// each prompt's tokens once (samples i*n .. i*n+n-1 share prompt i; its
// first sample with usage counts), every sample's completion tokens; the
// cached prompt tokens are the most any sample had. Nil when no sample
// reported usage.
func MergeUsage(us []*openai.Usage, n int) *openai.Usage {
	var m *openai.Usage
	counted := -1 // the last prompt whose tokens were counted
	for i, u := range us {
		if u == nil {
			continue
		}
		if m == nil {
			m = &openai.Usage{}
		}
		if p := i / n; p != counted {
			counted = p
			m.PromptTokens += u.PromptTokens
		}
		m.CompletionTokens += u.CompletionTokens
		if u.PromptTokensDetails != nil {
			if m.PromptTokensDetails == nil {
				m.PromptTokensDetails = &openai.PromptTokensDetails{}
			}
			m.PromptTokensDetails.CachedTokens = max(m.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CachedTokens)
		}
	}
	if m != nil {
		m.TotalTokens = m.PromptTokens + m.CompletionTokens
	}
	return m
}

// UsageChunk is the usage chunk that ends a merged stream with
// include_usage, framed as an event: the first of the samples' own usage
// chunks (chunks, nil where a sample sent none) under id, with the usage
// of usages merged as MergeUsage merges it. Nil when no sample sent a
// usage chunk.
func UsageChunk(chunks []Object, usages []*openai.Usage, id string, n int) []byte {
	u := MergeUsage(usages, n)
	if u == nil {
		return nil
	}
	var tpl Object
	for _, c := range chunks {
		if c != nil {
			tpl = c
			break
		}
	}
	ub, err := json.Marshal(u)
	if err != nil || tpl == nil {
		return nil
	}
	return Frame(tpl.Set("id", Quote(id)).Set("usage", ub).Marshal())
}

// IsUsageChunk reports whether a streamed chunk is the usage-only chunk
// that ends a stream with include_usage: no choices, a usage member.
func IsUsageChunk(obj Object) bool {
	_, hasUsage := obj.Get("usage")
	raw, ok := obj.Get("choices")
	if !hasUsage || !ok {
		return false
	}
	items, err := ParseArray(raw)
	return err == nil && len(items) == 0
}

// CarriesToken reports whether a streamed chunk carries generated text
// (content, reasoning_content from a worker's reasoning parser, or
// tool_calls from its tool-call parser) or a finish reason (a chat
// stream's opening chunk, with the role only, does not).
func CarriesToken(obj Object) bool {
	raw, ok := obj.Get("choices")
	if !ok {
		return false
	}
	var choices []struct {
		Text  *string `json:"text"`
		Delta *struct {
			Content          *string           `json:"content"`
			ReasoningContent *string           `json:"reasoning_content"`
			ToolCalls        []json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	if json.Unmarshal(raw, &choices) != nil {
		return false
	}
	for _, c := range choices {
		if (c.Text != nil && *c.Text != "") || (c.Delta != nil && c.Delta.Content != nil && *c.Delta.Content != "") ||
			(c.Delta != nil && c.Delta.ReasoningContent != nil && *c.Delta.ReasoningContent != "") ||
			(c.Delta != nil && len(c.Delta.ToolCalls) > 0) || c.FinishReason != nil {
			return true
		}
	}
	return false
}
