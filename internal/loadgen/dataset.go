package loadgen

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// maxDatasetItems caps the lines read from a dataset file.
const maxDatasetItems = 1 << 20

// Item is one request of a run: its prompt, its nominal prompt length (used
// when the server reports no usage), its max_tokens and its class.
type Item struct {
	// Prompt is the prompt text; when empty, Text generates InputLen random
	// words from the item's seed and index, so a large synthetic run does
	// not hold every prompt in memory.
	Prompt    string
	InputLen  int
	MaxTokens int
	// Class names the request's class in a mixed or file dataset; "" when
	// the dataset has none.
	Class string

	seed  uint64
	index int
}

// Text returns the prompt to send.
func (it *Item) Text() string {
	if it.Prompt != "" {
		return it.Prompt
	}
	return makePrompt(it.seed, it.index, it.InputLen)
}

// Class is one class of a mixed dataset: requests with input lengths drawn
// uniformly from [InMin, InMax] words and max_tokens from [OutMin, OutMax],
// making up Share of the requests.
type Class struct {
	Name           string
	Share          float64
	InMin, InMax   int
	OutMin, OutMax int
}

// ParseMixed parses a mixed dataset spec: classes separated by ";", each
// "NAME:share=S,in=N|A-B,out=N|A-B", e.g.
// "long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128".
// Shares are normalised to sum to 1.
func ParseMixed(spec string) ([]Class, error) {
	var out []Class
	var total float64
	seen := map[string]bool{}
	for part := range strings.SplitSeq(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rest, ok := strings.Cut(part, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("mixed class %q: want NAME:share=S,in=N,out=N", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("mixed class %q given twice", name)
		}
		seen[name] = true
		c := Class{Name: name}
		var haveShare, haveIn, haveOut bool
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, fmt.Errorf("mixed class %q: %q is not key=value", name, kv)
			}
			var err error
			switch k {
			case "share":
				c.Share, err = strconv.ParseFloat(v, 64)
				if err == nil && (math.IsNaN(c.Share) || math.IsInf(c.Share, 0) || c.Share <= 0) {
					err = errors.New("must be a positive number")
				}
				haveShare = true
			case "in":
				c.InMin, c.InMax, err = parseRange(v, maxPromptTokens)
				haveIn = true
			case "out":
				c.OutMin, c.OutMax, err = parseRange(v, maxGenTokens)
				haveOut = true
			default:
				err = errors.New("unknown key (use share, in, out)")
			}
			if err != nil {
				return nil, fmt.Errorf("mixed class %q: %s=%s: %w", name, k, v, err)
			}
		}
		if !haveShare || !haveIn || !haveOut {
			return nil, fmt.Errorf("mixed class %q needs share, in and out", name)
		}
		total += c.Share
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("mixed spec has no class: e.g. long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128")
	}
	for i := range out {
		out[i].Share /= total
	}
	return out, nil
}

// parseRange parses "N" or "A-B" with 1 <= A <= B <= limit.
func parseRange(s string, limit int) (int, int, error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, fmt.Errorf("not a number or range A-B: %w", err)
	}
	hi := lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil {
			return 0, 0, fmt.Errorf("not a number or range A-B: %w", err)
		}
	}
	if lo < 1 || hi < lo || hi > limit {
		return 0, 0, fmt.Errorf("range %d-%d is out of bounds: use 1 <= A <= B <= %d", lo, hi, limit)
	}
	return lo, hi, nil
}

// RandomRange returns the bounds vLLM's random dataset draws a length from:
// [L(1-r), L(1+r)], at least 1.
func RandomRange(l int, ratio float64) (int, int) {
	lo := max(1, int(math.Floor(float64(l)*(1-ratio))))
	hi := max(lo, int(math.Ceil(float64(l)*(1+ratio))))
	return lo, hi
}

// between draws uniformly from [lo, hi].
func between(r *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + r.IntN(hi-lo+1)
}

// RandomItems returns n requests whose input and output lengths are drawn
// uniformly from RandomRange(in, ratio) and RandomRange(out, ratio); ratio 0
// gives exactly in and out.
func RandomItems(n, in, out int, ratio float64, seed uint64) []Item {
	r := rand.New(rand.NewPCG(seed, 0x72616e64)) // "rand"
	ilo, ihi := RandomRange(in, ratio)
	olo, ohi := RandomRange(out, ratio)
	items := make([]Item, n)
	for i := range items {
		il := between(r, ilo, ihi)
		items[i] = Item{InputLen: il, MaxTokens: between(r, olo, ohi), seed: seed, index: i}
	}
	return items
}

// MixedItems returns n requests, each of a class chosen at random by share
// (seeded), with lengths drawn from its class's ranges.
func MixedItems(n int, classes []Class, seed uint64) []Item {
	r := rand.New(rand.NewPCG(seed, 0x6d697864)) // "mixd"
	items := make([]Item, n)
	for i := range items {
		u := r.Float64()
		c := classes[len(classes)-1]
		for _, k := range classes {
			if u < k.Share {
				c = k
				break
			}
			u -= k.Share
		}
		il := between(r, c.InMin, c.InMax)
		items[i] = Item{InputLen: il, MaxTokens: between(r, c.OutMin, c.OutMax), Class: c.Name, seed: seed, index: i}
	}
	return items
}

// ReadItemsFile reads a JSONL dataset; see ReadItems.
func ReadItemsFile(path string, n int, seed uint64) ([]Item, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	items, err := ReadItems(f, n, seed)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	return items, nil
}

// ReadItems reads JSONL lines {"prompt": "...", "max_tokens": N, "class":
// "..."} ("class" optional; blank lines skipped) and returns n requests: the
// lines shuffled by seed, taken in turn and reused when the file has fewer
// than n. A prompt's nominal length is its word count.
func ReadItems(rd io.Reader, n int, seed uint64) ([]Item, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), MaxBodyBytes)
	var lines []Item
	for ln := 1; sc.Scan(); ln++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		if len(lines) >= maxDatasetItems {
			return nil, fmt.Errorf("more than %d lines", maxDatasetItems)
		}
		it, err := jsonlItem(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		lines = append(lines, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(lines) == 0 {
		return nil, errors.New("no requests in the file")
	}
	r := rand.New(rand.NewPCG(seed, 0x66696c65)) // "file"
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	items := make([]Item, n)
	for i := range items {
		items[i] = lines[i%len(lines)]
	}
	return items, nil
}

// jsonlItem reads one JSONL line {"prompt": "...", "max_tokens": N,
// "class": "..."}, saying what is wrong in the file's terms.
func jsonlItem(b string) (Item, error) {
	const want = `want {"prompt": "...", "max_tokens": N}`
	var v map[string]json.RawMessage
	if err := json.Unmarshal([]byte(b), &v); err != nil {
		var se *json.SyntaxError
		switch {
		case strings.HasPrefix(b, "["):
			return Item{}, errors.New("a JSON array, not a JSON Lines object: a ShareGPT file needs --dataset-name sharegpt; " + want)
		case errors.As(err, &se):
			return Item{}, fmt.Errorf("not valid JSON at column %d: %v; %s", se.Offset, se, want)
		}
		return Item{}, fmt.Errorf("%s, not an object; %s", describe(json.RawMessage(b)), want)
	}
	var it Item
	p, ok := v["prompt"]
	if !ok {
		return Item{}, errors.New(`no "prompt"; ` + want)
	}
	if json.Unmarshal(p, &it.Prompt) != nil || p[0] == 'n' {
		return Item{}, fmt.Errorf(`"prompt" is %s, want a string`, describe(p))
	}
	if it.Prompt == "" {
		return Item{}, errors.New(`"prompt" is empty`)
	}
	m, ok := v["max_tokens"]
	if !ok {
		return Item{}, errors.New(`no "max_tokens"; ` + want)
	}
	if json.Unmarshal(m, &it.MaxTokens) != nil {
		return Item{}, fmt.Errorf(`"max_tokens" is %s, want an integer`, describe(m))
	}
	if it.MaxTokens < 1 || it.MaxTokens > maxGenTokens {
		return Item{}, fmt.Errorf("max_tokens %d is out of range: use 1..%d", it.MaxTokens, maxGenTokens)
	}
	if c, ok := v["class"]; ok {
		if json.Unmarshal(c, &it.Class) != nil {
			return Item{}, fmt.Errorf(`"class" is %s, want a string`, describe(c))
		}
	}
	it.InputLen = max(1, len(strings.Fields(it.Prompt)))
	return it, nil
}
