package chart

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestValuesDocumented checks that every value of values.yaml, or a key
// above it, is documented in the chart's README and carries a `# --` comment
// in values.yaml. It needs no binaries.
func TestValuesDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	documented := documentedKeys(string(raw))
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, sub := range m {
				walk(strings.TrimPrefix(prefix+"."+k, "."), sub)
			}
			return
		}
		leaves = append(leaves, prefix)
	}
	walk("", values)
	sort.Strings(leaves)
	for _, leaf := range leaves {
		inReadme, commented := false, false
		for p := leaf; p != ""; p = parent(p) {
			inReadme = inReadme || strings.Contains(string(readme), "`"+p+"`")
			commented = commented || documented[p]
		}
		if !inReadme {
			t.Errorf("value %s is not in the chart's README (nor a key above it)", leaf)
		}
		if !commented {
			t.Errorf("value %s has no `# --` comment in values.yaml (nor a key above it)", leaf)
		}
	}
	if len(leaves) < 50 {
		t.Fatalf("found only %d values: the walk is broken", len(leaves))
	}
}

func parent(p string) string {
	i := strings.LastIndex(p, ".")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// documentedKeys returns the dotted keys of values.yaml that follow a
// `# --` comment, reading the keys' nesting from their indentation.
func documentedKeys(src string) map[string]bool {
	out := map[string]bool{}
	type level struct {
		indent int
		key    string
	}
	var stack []level
	pending := false
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		switch {
		case strings.HasPrefix(trimmed, "# --"):
			pending = true
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "-"):
			continue
		}
		key, _, ok := strings.Cut(trimmed, ":")
		if !ok || strings.ContainsAny(key, " {}[]") {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, level{indent, key})
		if pending {
			parts := make([]string, len(stack))
			for i, l := range stack {
				parts[i] = l.key
			}
			out[strings.Join(parts, ".")] = true
			pending = false
		}
	}
	return out
}
