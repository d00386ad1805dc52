package synth

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// TestMixTypes holds each mix to llama.cpp's choices, written out by hand
// from llama_tensor_get_type_impl for the 1b shape (22 layers, 32 heads, 4
// KV heads: n_gqa 8) and the tiny one (2 layers, n_gqa 2).
func TestMixTypes(t *testing.T) {
	const (
		q2, q3, q4, q5, q6 = tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K
		xs, nl, fp4, q8    = tensor.IQ4_XS, tensor.IQ4_NL, tensor.MXFP4, tensor.Q8_0
	)
	// want gives per kind the type of layers in the set (nil: all) and of
	// the others; token_embd and output are kinds too.
	type rule struct {
		in     []int
		t, out tensor.Type
	}
	all := func(t tensor.Type) rule { return rule{nil, t, t} }
	moreBits22 := []int{0, 1, 4, 7, 10, 13, 16, 19, 20, 21}
	cases := []struct {
		preset string
		typ    tensor.Type
		pure   bool
		want   map[string]rule
	}{
		{"1b", q4, false, map[string]rule{"token_embd": all(q4), "output": all(q6),
			"attn_v": {moreBits22, q6, q4}, "ffn_down": {moreBits22, q6, q4}}},
		{"1b", q3, false, map[string]rule{"token_embd": all(q3), "output": all(q6),
			"attn_v": {[]int{0, 1}, q5, q4}, "ffn_down": {[]int{0}, q5, q4}, "attn_output": all(q4)}},
		{"1b", q2, false, map[string]rule{"token_embd": all(q2), "output": all(q6),
			"attn_v": all(q4), "ffn_down": all(q3), "attn_output": all(q3)}},
		{"1b", xs, false, map[string]rule{"token_embd": all(xs), "output": all(q6),
			"attn_v": all(q5), "ffn_down": {[]int{0, 1}, q5, xs}}},
		{"1b", nl, false, map[string]rule{"token_embd": all(nl), "output": all(q6),
			"attn_v": all(q5), "ffn_down": {[]int{0, 1}, q5, nl}}},
		{"1b", fp4, false, map[string]rule{"token_embd": all(q8), "output": all(q8), "attn_q": all(q8),
			"attn_k": all(q8), "attn_v": all(q8), "attn_output": all(q8), "ffn_gate": all(fp4),
			"ffn_up": all(fp4), "ffn_down": all(fp4)}},
		{"1b", q3, true, map[string]rule{"output": all(q3)}},
		{"1b", fp4, true, map[string]rule{"output": all(fp4)}},
		{"tiny", q3, false, map[string]rule{"output": all(q6), "attn_v": all(q5), "ffn_down": all(q4), "attn_output": all(q4)}},
		{"tiny", q2, false, map[string]rule{"output": all(q6), "attn_v": all(q3), "ffn_down": all(q3), "attn_output": all(q3)}},
		{"tiny", xs, false, map[string]rule{"output": all(q6)}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-%s-pure=%v", c.preset, c.typ, c.pure), func(t *testing.T) {
			cfg, _ := Preset(c.preset)
			cfg = cfg.withDefaults()
			for _, s := range layout(cfg, c.typ, c.pure, cfg.Vocab) {
				if s.norm {
					continue
				}
				kind, layer := strings.TrimSuffix(s.name, ".weight"), -1
				if _, err := fmt.Sscanf(s.name, "blk.%d.", &layer); err == nil {
					kind = strings.TrimSuffix(s.name[strings.Index(s.name[4:], ".")+5:], ".weight")
				}
				r, ok := c.want[kind]
				if !ok {
					r = all(c.typ)
				}
				want := r.out
				if r.in == nil || slices.Contains(r.in, layer) {
					want = r.t
				}
				if s.typ != want {
					t.Errorf("%s: %s, llama.cpp %s", s.name, s.typ, want)
				}
			}
		})
	}
	// A tied token_embd is typed as the output.
	cfg, _ := Preset("tiny")
	cfg.Tied = true
	if got := layout(cfg.withDefaults(), q3, false, 512)[0]; got.name != "token_embd.weight" || got.typ != q6 {
		t.Errorf("tied q3_k_m: %s is %s, want q6_k", got.name, got.typ)
	}
}

func TestParseFileType(t *testing.T) {
	for name, want := range map[string]tensor.Type{"q4_k_m": tensor.Q4_K, "Q3_K_M": tensor.Q3_K, "q3_k": tensor.Q3_K,
		"iq4_xs": tensor.IQ4_XS, "mxfp4_moe": tensor.MXFP4, "q8_0": tensor.Q8_0, "q2_k": tensor.Q2_K, "iq4_nl": tensor.IQ4_NL} {
		if got, err := ParseFileType(name); err != nil || got != want {
			t.Errorf("ParseFileType(%q) = %s, %v, want %s", name, got, err, want)
		}
	}
	for _, name := range FileTypeNames {
		if _, err := ParseFileType(name); err != nil {
			t.Errorf("ParseFileType(%q): %v", name, err)
		}
	}
	if _, err := ParseFileType("q6_k"); err == nil || !strings.Contains(err.Error(), "q4_k_m") {
		t.Errorf("ParseFileType(q6_k) error = %v, want one listing the names", err)
	}
}

// TestNewTypesRoundTrip writes the tiny preset in each new file type, mixed
// and pure, reads it back and checks every matrix's type (as layout says)
// and statistics after dequantization: the quantizers' output decodes to
// weights of mean about 0 and standard deviation about 0.02.
func TestNewTypesRoundTrip(t *testing.T) {
	for _, typ := range []tensor.Type{tensor.Q3_K, tensor.Q2_K, tensor.IQ4_XS, tensor.IQ4_NL, tensor.MXFP4} {
		for _, pure := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-pure=%v", typ, pure), func(t *testing.T) {
				o := tinyOptions(t, typ, 7)
				o.Pure = pure
				path := filepath.Join(t.TempDir(), "tiny.gguf")
				if err := Write(path, o); err != nil {
					t.Fatalf("Write: %v", err)
				}
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if got, _ := f.Uint32("general.file_type"); got != fileTypes[typ].ftype {
					t.Errorf("general.file_type = %d, want %d", got, fileTypes[typ].ftype)
				}
				specs := map[string]tensorSpec{}
				for _, s := range layout(o.Config.withDefaults(), typ, pure, 512) {
					specs[s.name] = s
				}
				seen := map[tensor.Type]bool{}
				for _, ti := range f.Tensors {
					s := specs[ti.Name]
					if ti.Type != s.typ {
						t.Errorf("%s: type %s, layout says %s", ti.Name, ti.Type, s.typ)
					}
					if s.norm {
						continue
					}
					seen[ti.Type] = true
					vals := make([]float32, ti.NumElements())
					if err := tensor.Dequantize(ti.Type, ti.Data, vals); err != nil {
						t.Fatalf("dequantize %s: %v", ti.Name, err)
					}
					var sum, sq float64
					for _, v := range vals {
						sum += float64(v)
						sq += float64(v) * float64(v)
					}
					n := float64(len(vals))
					mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
					if math.Abs(mean) > 0.002 || std < 0.016 || std > 0.024 {
						t.Errorf("%s (%s): mean %.5f, std %.5f; want about 0 and 0.02", ti.Name, ti.Type, mean, std)
					}
				}
				if !seen[typ] {
					t.Errorf("no matrix has the file's type %s", typ)
				}
			})
		}
	}
}
