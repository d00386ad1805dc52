package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// Case mappings as Python's str methods do them: full Unicode mappings
// (ß upper-cases to SS, İ lower-cases to i̇, a final Σ lower-cases to ς),
// not Go's one-rune mappings. ASCII text takes the fast path.

func pyUpper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	return cases.Upper(language.Und).String(s)
}

func pyLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	return cases.Lower(language.Und).String(s)
}

func pyCasefold(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	return cases.Fold().String(s)
}

// pyTitleRune is the full title-case mapping of one character.
func pyTitleRune(c rune) string {
	if c < utf8.RuneSelf {
		return string(unicode.ToUpper(c))
	}
	return cases.Title(language.Und, cases.NoLower).String(string(c))
}

// pyTitle is Python's str.title: a cased character after an uncased one
// is title-cased, after a cased one lower-cased.
func pyTitle(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	prevCased := false
	for _, c := range s {
		if prevCased {
			b.WriteString(pyLower(string(c)))
		} else {
			b.WriteString(pyTitleRune(c))
		}
		prevCased = unicode.IsUpper(c) || unicode.IsLower(c) || unicode.IsTitle(c)
	}
	return b.String()
}

// pyCapitalize is Python's str.capitalize: the first character
// title-cased, the rest lower-cased.
func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	c, n := utf8.DecodeRuneInString(s)
	return pyTitleRune(c) + pyLower(s[n:])
}

func swapCase(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case unicode.IsUpper(c):
			b.WriteString(pyLower(string(c)))
		case unicode.IsLower(c):
			b.WriteString(pyUpper(string(c)))
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}
