package kernels

import (
	"strings"
	"testing"
)

// TestSetLevelByName: every level name the CPU can run selects that level,
// an empty name leaves the level alone, and an unknown name is an error
// that changes nothing.
func TestSetLevelByName(t *testing.T) {
	defer SetLevel(CurrentLevel())() // restores the level the test found
	for _, l := range []Level{Generic, AVX2, AVX512} {
		err := SetLevelByName(l.String())
		if CheckLevel(l) != nil {
			if err == nil || !strings.Contains(err.Error(), "cpu lacks") {
				t.Errorf("%s: error %v, want the missing CPU features", l, err)
			}
			continue
		}
		if err != nil || CurrentLevel() != l {
			t.Errorf("%s: error %v, level %s", l, err, CurrentLevel())
		}
	}
	SetLevel(Generic)
	if err := SetLevelByName(""); err != nil || CurrentLevel() != Generic {
		t.Errorf("empty name: error %v, level %s; want no change", err, CurrentLevel())
	}
	if err := SetLevelByName("avx9"); err == nil || CurrentLevel() != Generic {
		t.Errorf("unknown name: error %v, level %s; want an error and no change", err, CurrentLevel())
	}
}
