package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRenderInputErrors(t *testing.T) {
	ct, err := NewTemplate("{{ messages | tojson }}{% if x is defined %}{{ x | tojson(separators=1) }}{% endif %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   Input
		want string
	}{
		{Input{Messages: []byte(`{"role":"user"}`)}, "messages must be an array"},
		{Input{Messages: []byte(`[{"role":`)}, "invalid JSON"},
		{Input{Messages: []byte(`[] []`)}, "more than one value"},
		{Input{Messages: []byte(strings.Repeat("[", 100) + strings.Repeat("]", 100))}, "nested"},
		{Input{Messages: []byte(`[]`), Tools: []byte(`[`)}, "tools"},
		{Input{Messages: []byte(`[]`), Kwargs: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}, "separators must be two strings"},
		// Finding 10b: a kwarg cannot replace a template builtin.
		{Input{Messages: []byte(`[]`), Kwargs: map[string]json.RawMessage{"namespace": json.RawMessage(`1`)}}, "chat_template_kwargs.namespace"},
		{Input{Messages: []byte(`[]`), Kwargs: map[string]json.RawMessage{"range": json.RawMessage(`"x"`)}}, "cannot be replaced"},
	} {
		if _, err := ct.RenderInput(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RenderInput(%s, kwargs %v) error %v, want one mentioning %q", tc.in.Messages, tc.in.Kwargs, err, tc.want)
		}
	}
}
