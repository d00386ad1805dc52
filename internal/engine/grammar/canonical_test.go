package grammar

import "testing"

// TestNumbersOneSpelling checks that integers and numeric enum/const values
// have one spelling, so a generation cannot go on writing zeros: "1" but not
// "1.0" or "1.000", and 0.5 as "0.5" only.
func TestNumbersOneSpelling(t *testing.T) {
	v := byteVocab(t)
	for _, c := range []struct {
		schema   string
		yes, not []string
	}{
		{`{"type":"integer"}`, []string{"1", "-7", "120"}, []string{"1.0", "6.000", "-7.0"}},
		{`{"type":"integer","minimum":0,"maximum":120}`, []string{"0", "120"}, []string{"0.0", "120.00"}},
		{`{"enum":[1, 0.50, "a"]}`, []string{"1", "0.5", `"a"`}, []string{"1.0", "0.50", "0.500"}},
		{`{"const":2.0}`, []string{"2"}, []string{"2.0", "2.00"}},
	} {
		g := mustCompile(t, c.schema, Options{DisableAnyWhitespace: true})
		for _, d := range c.yes {
			if !accepts(g, v, d) {
				t.Errorf("%s: %q refused", c.schema, d)
			}
		}
		for _, d := range c.not {
			if accepts(g, v, d) {
				t.Errorf("%s: %q accepted; only the shortest spelling may be", c.schema, d)
			}
		}
	}
}
