package model

import (
	"slices"
	"testing"
)

// TestIMRopeFourthAxis: the rotary pairs that take the fourth axis'
// position (0 for text, so they do not rotate) under ggml's interleaved
// multi-axis RoPE: none with Qwen3.5's sections [11 11 10 0] over 32 pairs;
// with [1 1 1 5] every pair from sector 3 on, whose sector mod 3 is past
// three times its axis' section.
func TestIMRopeFourthAxis(t *testing.T) {
	fourth := func(secs [4]int, pairs int) []int {
		c := Config{RopeSections: secs}
		var got []int
		for i := range pairs {
			if c.imropeFourth(i) {
				got = append(got, i)
			}
		}
		return got
	}
	if got := fourth([4]int{11, 11, 10, 0}, 32); got != nil {
		t.Errorf("[11 11 10 0]: pairs %v on the fourth axis, want none", got)
	}
	if got := fourth([4]int{1, 1, 1, 5}, 8); !slices.Equal(got, []int{3, 4, 5, 6, 7}) {
		t.Errorf("[1 1 1 5]: pairs %v on the fourth axis, want 3..7", got)
	}
	// sectors repeat every Σsections pairs
	if got := fourth([4]int{1, 1, 0, 2}, 8); !slices.Equal(got, []int{2, 3, 6, 7}) {
		t.Errorf("[1 1 0 2]: pairs %v on the fourth axis, want [2 3 6 7]", got)
	}
	if got := fourth([4]int{}, 8); got != nil {
		t.Errorf("no sections: pairs %v on the fourth axis", got)
	}
}
