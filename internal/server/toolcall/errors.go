package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Error is a problem with a request's tool fields that only building the
// grammar finds (a schema it cannot honour, a named function it lacks):
// Param names the member (tools[2].function.parameters), Message says what
// is wrong in OpenAI's words.
type Error struct {
	Param   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(param, format string, args ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// clip shortens s to at most 40 bytes (on a character boundary) for an
// error message.
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
