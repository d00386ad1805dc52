package chat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestRewriteFilters(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{{ x | tojson }}", "{{ x | tandem_tojson }}"},
		{"{{ x|tojson(indent=2) }}", "{{ x|tandem_tojson(indent=2) }}"},
		{"{%- set y = x | tojson -%}", "{%- set y = x | tandem_tojson -%}"},
		{"{{ 'a | tojson' }} {{ \"b | tojson\" }}", "{{ 'a | tojson' }} {{ \"b | tojson\" }}"},
		{"{# x | tojson #}text | tojson", "{# x | tojson #}text | tojson"},
		{"{{ tojson }} {{ x | tojsonx }} {{ 'it\\'s | tojson' | tojson }}", "{{ tojson }} {{ x | tojsonx }} {{ 'it\\'s | tojson' | tandem_tojson }}"},
		{"{ x | tojson } {{ unclosed | tojson", "{ x | tojson } {{ unclosed | tandem_tojson"},
	} {
		if got := rewriteFilters(tc.in); got != tc.want {
			t.Errorf("rewriteFilters(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPythonFloat(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 0.5: "0.5", 1e-7: "1e-07", 1e21: "1e+21", 123456789: "123456789.0",
		1e16: "1e+16", 1e15: "1000000000000000.0", 1e-4: "0.0001", 1.5e-5: "1.5e-05", -0.25: "-0.25", 1.5e300: "1.5e+300"} {
		if got := pythonFloat(f); got != want {
			t.Errorf("pythonFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestRenderInputErrors(t *testing.T) {
	ct, err := NewTemplate("{{ messages | tojson }}{{ x | tojson(indent='a') }}", "", "")
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
		{Input{Messages: []byte(`[]`), Kwargs: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}, "indent must be an integer"},
	} {
		if _, err := ct.RenderInput(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RenderInput(%s) error %v, want one mentioning %q", tc.in.Messages, err, tc.want)
		}
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2026, 3, 7, 15, 4, 5, 0, time.UTC)
	if got, want := strftime(tm, "%d %b %Y|%A %a %B %m %H:%M:%S %I%p %j %y %e %% %Q"), "07 Mar 2026|Saturday Sat March 03 15:04:05 03PM 066 26  7 % %Q"; got != want {
		t.Errorf("strftime = %q, want %q", got, want)
	}
}
