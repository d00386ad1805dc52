package modelhub

import "testing"

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"64424509440": 64424509440, "60G": 60 << 30, "60GiB": 60 << 30, "512M": 512 << 20,
		"1T": 1 << 40, "8k": 8 << 10, " 2G ": 2 << 30, "100B": 100} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "0", "1.5G", "10X", "10GG", "9999999999T", "ten"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}

// FuzzParseBytes: any $TANDEM_PULL_MAX_BYTES is a positive count or an error.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"60G", "1", "9223372036854775807", "8388608T", "G", "1.5G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseBytes(s); err == nil && n <= 0 {
			t.Fatalf("parseBytes(%q) = %d without an error", s, n)
		}
	})
}
