package answer

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// CachedTokens returns usage.prompt_tokens_details.cached_tokens of an
// answer (a prefill leg's), or 0 when it has none.
func CachedTokens(body []byte) int {
	var doc struct {
		Usage *struct {
			Details *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Usage == nil || doc.Usage.Details == nil {
		return 0
	}
	return max(doc.Usage.Details.Cached, 0)
}

// MayCarryUsage reports cheaply whether data (an event's or an answer's)
// may hold a usage member; false means it surely does not.
func MayCarryUsage(data []byte) bool { return bytes.Contains(data, []byte(`"usage"`)) }

// RaiseCachedTokens sets usage.prompt_tokens_details.cached_tokens of o to
// cached when o has a usage object whose count is lower, keeping every
// other member as it was. It reports whether o changed; o is returned as
// it was when it has no usage or a usage that does not decode.
func RaiseCachedTokens(o Object, cached int) (Object, bool) {
	raw, ok := o.Get("usage")
	if !ok || cached <= 0 {
		return o, false
	}
	u, err := ParseObject(raw)
	if err != nil {
		return o, false
	}
	var d Object
	if draw, ok := u.Get("prompt_tokens_details"); ok {
		if d, err = ParseObject(draw); err != nil {
			return o, false
		}
	}
	if craw, ok := d.Get("cached_tokens"); ok {
		if n, err := strconv.Atoi(string(bytes.TrimSpace(craw))); err == nil && n >= cached {
			return o, false
		}
	}
	d = d.Set("cached_tokens", json.RawMessage(strconv.Itoa(cached)))
	u = u.Set("prompt_tokens_details", d.Marshal())
	return o.Set("usage", u.Marshal()), true
}
