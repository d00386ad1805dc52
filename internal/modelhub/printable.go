package modelhub

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s, a name or message from the hub, safe to show on a
// terminal: control characters (C0, DEL, C1), Unicode format characters
// (bidirectional overrides, zero-width marks), line and paragraph
// separators and bytes that are not UTF-8 are written as Go escapes
// (\x1b, \u202e), and a backslash as \\, so a hub cannot move the cursor,
// retitle the window or reorder what is printed. Everything else is kept.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r == '\\' || unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unsafeRune(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// clipText cuts s to at most n bytes (on a character boundary), saying so.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes in all)", s[:n], len(s))
}
