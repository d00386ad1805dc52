package modelhub

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// DefaultQuant is the quantization a repository reference without a tag
// picks when the repository has it.
const DefaultQuant = "Q4_K_M"

var (
	splitName = regexp.MustCompile(`(?i)-\d{5}-of-\d{5}\.gguf$`)
	// quantInName finds a llama.cpp quantization tag in a file name, to
	// suggest tags when a choice is needed.
	quantInName = regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9])((?:I?Q[1-8](?:_[A-Z0-9]+)*)|BF16|F16|F32)(?:[^A-Za-z0-9_]|$)`)
)

// isGGUF reports whether a repository file is a model GGUF: a .gguf file
// that is not a multimodal projector (mmproj).
func isGGUF(name string) bool {
	base := strings.ToLower(path.Base(name))
	return strings.HasSuffix(base, ".gguf") && !strings.Contains(base, "mmproj")
}

// hasTag reports whether name contains tag (case-insensitive) as a whole
// word: not preceded by a letter or digit and not followed by a letter,
// digit or underscore, so Q4_K does not match Q4_K_M and Q4_0 not IQ4_0.
func hasTag(name, tag string) bool {
	n, t := strings.ToUpper(name), strings.ToUpper(tag)
	for i := 0; ; {
		j := strings.Index(n[i:], t)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(t)
		before := start == 0 || !isAlnum(n[start-1])
		after := end == len(n) || !(isAlnum(n[end]) || n[end] == '_')
		if before && after {
			return true
		}
		i = start + 1
	}
}

func isAlnum(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// SelectFile picks the GGUF file a repository reference means from the
// repository's file list: the one whose name carries quant (a whole-word,
// case-insensitive match, as ollama does for hf.co references); with no quant,
// the DefaultQuant file if there is one, else the only GGUF. Split GGUFs
// (NAME-00001-of-00003.gguf) are refused; so is an ambiguous choice, with an
// error that lists the choices.
func SelectFile(repo string, files []string, quant string) (string, error) {
	var ggufs []string
	for _, f := range files {
		if isGGUF(f) {
			ggufs = append(ggufs, f)
		}
	}
	slices.Sort(ggufs)
	if len(ggufs) == 0 {
		return "", fmt.Errorf("repository %s has no .gguf file: tandem loads GGUF models, so look for a GGUF conversion (such repositories are usually named …-GGUF)", repo)
	}
	pick := func(tag string) []string {
		var m []string
		for _, f := range ggufs {
			if hasTag(f, tag) {
				m = append(m, f)
			}
		}
		return m
	}
	var matches []string
	switch {
	case quant != "":
		matches = pick(quant)
		if len(matches) == 0 {
			return "", fmt.Errorf("repository %s has no .gguf file tagged %s; %s", repo, quant, choices(repo, ggufs))
		}
	default:
		matches = pick(DefaultQuant)
		if len(matches) == 0 {
			matches = ggufs
		}
	}
	var whole, split []string
	for _, f := range matches {
		if splitName.MatchString(f) {
			split = append(split, f)
		} else {
			whole = append(whole, f)
		}
	}
	switch {
	case len(whole) == 1:
		return whole[0], nil
	case len(whole) > 1 && quant != "":
		return "", fmt.Errorf("repository %s: the tag %s matches %d files, so give a tag that picks one (or the file's URL, https://huggingface.co/%s/resolve/main/FILE); %s", repo, quant, len(whole), repo, choices(repo, ggufs))
	case len(whole) > 1:
		return "", fmt.Errorf("repository %s has %d GGUF files and none tagged %s, so add a tag: hf.co/%s:TAG; %s", repo, len(whole), DefaultQuant, repo, choices(repo, ggufs))
	}
	return "", fmt.Errorf("repository %s: %s is a split GGUF, which tandem does not load; merge the parts with llama.cpp's `llama-gguf-split --merge` and pass the file with --model, or pick another quantization; %s", repo, names(split), choices(repo, ggufs))
}

// names joins file names from the hub for an error: escaped (Printable),
// at most shownCandidates of them, then how many more.
func names(fs []string) string {
	shown := make([]string, 0, min(len(fs), shownCandidates))
	for _, f := range fs[:min(len(fs), shownCandidates)] {
		shown = append(shown, Printable(f))
	}
	s := strings.Join(shown, ", ")
	if len(fs) > shownCandidates {
		s += fmt.Sprintf(" and %d more", len(fs)-shownCandidates)
	}
	return s
}

// choices describes the GGUF files of a repository and the tags that pick
// them: the first shownCandidates, escaped (Printable), then how many more.
func choices(repo string, ggufs []string) string {
	var b strings.Builder
	b.WriteString("the repository's GGUF files are:")
	for _, f := range ggufs[:min(len(ggufs), shownCandidates)] {
		b.WriteString("\n  ")
		b.WriteString(Printable(f))
		if m := quantInName.FindStringSubmatch(path.Base(f)); m != nil {
			fmt.Fprintf(&b, "  (hf.co/%s:%s)", repo, Printable(strings.ToUpper(m[1])))
		}
	}
	if len(ggufs) > shownCandidates {
		fmt.Fprintf(&b, "\n  ... and %d more", len(ggufs)-shownCandidates)
	}
	return b.String()
}
