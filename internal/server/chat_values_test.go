package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRenderInputErrors(t *testing.T) {
	ct, err := NewChatTemplate("{{ messages | tojson }}{% if x is defined %}{{ x | tojson(separators=1) }}{% endif %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   ChatInput
		want string
	}{
		{ChatInput{Messages: []byte(`{"role":"user"}`)}, "messages must be an array"},
		{ChatInput{Messages: []byte(`[{"role":`)}, "invalid JSON"},
		{ChatInput{Messages: []byte(`[] []`)}, "more than one value"},
		{ChatInput{Messages: []byte(strings.Repeat("[", 100) + strings.Repeat("]", 100))}, "nested"},
		{ChatInput{Messages: []byte(`[]`), Tools: []byte(`[`)}, "tools"},
		{ChatInput{Messages: []byte(`[]`), Kwargs: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}, "separators must be two strings"},
		// Finding 10b: a kwarg cannot replace a template builtin.
		{ChatInput{Messages: []byte(`[]`), Kwargs: map[string]json.RawMessage{"namespace": json.RawMessage(`1`)}}, "chat_template_kwargs.namespace"},
		{ChatInput{Messages: []byte(`[]`), Kwargs: map[string]json.RawMessage{"range": json.RawMessage(`"x"`)}}, "cannot be replaced"},
	} {
		if _, err := ct.RenderInput(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RenderInput(%s, kwargs %v) error %v, want one mentioning %q", tc.in.Messages, tc.in.Kwargs, err, tc.want)
		}
	}
}
