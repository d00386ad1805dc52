package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRefusedAtLoad checks NewChatTemplate's load check: budgets broken on
// the representative conversations refuse a template with a message
// naming the budget, a template that cannot render a user message is
// refused, and one that refuses only some roles is kept.
func TestRefusedAtLoad(t *testing.T) {
	for _, c := range []struct {
		name, src, want string // want "": accepted
	}{
		{"recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "depth budget"},
		{"bomb only with tools", "{% if tools %}{{ 'x' * 3000000000 }}{% endif %}{{ messages[0].content }}", "string bytes budget"},
		{"fails on every conversation", "{{ raise_exception('never') }}", "cannot render a user message"},
		{"refuses the system role", "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ m.content }}{% endfor %}", ""},
	} {
		_, err := NewTemplate(c.src, "<s>", "</s>")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused (%v), want it accepted", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// TestOutputBudgetFollowsInput checks that a render's output budget grows
// with the request: a long message renders, a short request cannot make
// the template write megabytes.
func TestOutputBudgetFollowsInput(t *testing.T) {
	ct, err := NewTemplate("{% for m in messages %}{{ m.content }}{% endfor %}{% if n is defined %}{{ 'x' * n }}{% endif %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 3<<20)
	out, err := ct.RenderInput(Input{Messages: []byte(`[{"role":"user","content":"` + long + `"}]`)})
	if err != nil || len(out) != len(long) {
		t.Errorf("a 3 MiB message: %d bytes, %v; want it rendered", len(out), err)
	}
	_, err = ct.RenderInput(Input{Messages: []byte(`[{"role":"user","content":"hi"}]`), Kwargs: map[string]json.RawMessage{"n": []byte("2000000")}})
	if err == nil || !strings.Contains(err.Error(), "string bytes budget (1048") {
		t.Errorf("2 MB from a short request: %v, want the string budget of about 1 MiB", err)
	}
}
