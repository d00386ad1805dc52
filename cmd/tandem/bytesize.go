package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag value of bytes: a whole number, optionally with a
// unit (B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB and the
// bare K, M, G, T in powers of 1024, as vLLM and llama.cpp read them).
type byteSize int64

var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Type() string { return "bytes" }

func (b *byteSize) Set(v string) error {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mul, ok := byteUnits[unit]
	x, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || x < 0 {
		return fmt.Errorf("%q is not a size in bytes: write a number with an optional unit, e.g. 4GiB, 512MiB or 2000000000", v)
	}
	n := x * mul
	if n >= math.MaxInt64 {
		return fmt.Errorf("%q is too large", v)
	}
	*b = byteSize(n)
	return nil
}
