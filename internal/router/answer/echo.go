package answer

import (
	"bytes"
	"encoding/json"
)

// A decode worker cannot compute the prompt's logprobs (the prompt's KV
// came from prefill), so with echo and logprobs the prompt's entries of its
// legacy block's token_logprobs are null. The router fills them from the
// prefill leg's prompt_logprobs, as a single worker would have answered.

// FillEchoLogprobs sets entries 1 .. len(plp)-1 of choice c's
// logprobs.token_logprobs to the logprob numbers of prefill's prompt
// logprobs plp, where decode sent null. Entry 0 stays null (no logprob
// for the first prompt token, as OpenAI does). c is left as it was when
// it has no legacy block, when the block is shorter than the prompt, or
// when plp is not of the expected shape; every other byte is kept.
func FillEchoLogprobs(c Object, plp json.RawMessage) Object {
	vals := promptLogprobValues(plp)
	if len(vals) < 2 {
		return c
	}
	raw, ok := c.Get("logprobs")
	if !ok {
		return c
	}
	lp, err := ParseObject(raw)
	if err != nil {
		return c
	}
	traw, ok := lp.Get("token_logprobs")
	if !ok {
		return c
	}
	tlp, err := ParseArray(traw)
	if err != nil || len(tlp) < len(vals) {
		return c
	}
	changed := false
	for j := 1; j < len(vals); j++ {
		if vals[j] != nil && IsNull(tlp[j]) {
			tlp[j] = vals[j]
			changed = true
		}
	}
	if !changed {
		return c
	}
	return c.Set("logprobs", lp.Set("token_logprobs", MarshalArray(tlp)).Marshal())
}

// promptLogprobValues reads prompt_logprobs ([null, {"<id>": {"logprob":
// x, ...}}, ...]) into the raw bytes of each entry's logprob number; nil
// for entry 0 and for any entry of another shape. It returns nil when plp
// is not an array.
func promptLogprobValues(plp json.RawMessage) []json.RawMessage {
	items, err := ParseArray(plp)
	if err != nil {
		return nil
	}
	vals := make([]json.RawMessage, len(items))
	for j := 1; j < len(items); j++ {
		entry, err := ParseObject(items[j])
		if err != nil || len(entry) != 1 {
			continue
		}
		tok, err := ParseObject(entry[0].Val)
		if err != nil {
			continue
		}
		if x, ok := tok.Get("logprob"); ok && isNumber(x) {
			vals[j] = bytes.TrimSpace(x)
		}
	}
	return vals
}

// isNumber reports whether raw is a JSON number.
func isNumber(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))
}
