package toolcall

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// Format is a tool-call syntax. Its values are vLLM's --tool-call-parser
// names.
type Format string

// The formats.
const (
	Hermes     Format = "hermes"      // <tool_call>{"name": ..., "arguments": ...}</tool_call>
	Llama3JSON Format = "llama3_json" // [<|python_tag|>]{"name": ..., "parameters": ...}[; {...}]
	Mistral    Format = "mistral"     // [TOOL_CALLS][{...}, ...] or [TOOL_CALLS]name[ARGS]{...}
	Generic    Format = "generic"     // {"name": ..., "arguments": ...} or [{...}, ...]
)

// Markers of the formats, as the model writes them.
const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	pythonTag   = "<|python_tag|>"
	mistralCall = "[TOOL_CALLS]"
	mistralArgs = "[ARGS]"
	mistralID   = "[CALL_ID]"
)

// Auto is the flag value that selects the format from the chat template.
const Auto = "auto"

// ParseFormat reads a --tool-call-parser value: "auto" or "" (returned as
// "": decide from the chat template with Detect) or a format name.
func ParseFormat(name string) (Format, error) {
	switch f := Format(name); f {
	case "", Auto:
		return "", nil
	case Hermes, Llama3JSON, Mistral, Generic:
		return f, nil
	}
	return "", fmt.Errorf("tool call parser %q is not supported: use auto, hermes, llama3_json, mistral or generic", name)
}

// Detect chooses the format a chat template's model writes tool calls in,
// from the markers the template writes: <tool_call> (Hermes, Qwen),
// [TOOL_CALLS] (Mistral), <|python_tag|> or a "parameters" call object
// with Llama 3 headers (Llama 3.x); Generic otherwise (no template, or one
// that does not render tool calls).
func Detect(template string) Format {
	switch {
	case strings.Contains(template, hermesOpen):
		return Hermes
	case strings.Contains(template, mistralCall):
		return Mistral
	case strings.Contains(template, pythonTag),
		strings.Contains(template, "<|start_header_id|>") && strings.Contains(template, `"parameters"`):
		return Llama3JSON
	}
	return Generic
}

// Markers returns the texts of the format's special markers. A model's
// vocabulary often has them as control tokens, which detokenizing drops:
// the server keeps the text of such tokens in the output it parses.
func (f Format) Markers() []string {
	switch f {
	case Hermes:
		return []string{hermesOpen, hermesClose}
	case Llama3JSON:
		return []string{pythonTag}
	case Mistral:
		return []string{mistralCall, mistralArgs, mistralID}
	}
	return nil
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomChars returns n characters of idAlphabet from crypto/rand.
func randomChars(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails: crypto/rand crashes the program instead
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

// NewID returns a fresh tool call id for the format: "call_" and 24
// random letters and digits, as OpenAI's; for Mistral 9 letters and digits,
// the only ids Mistral's chat templates accept when the call comes back in
// the conversation.
func (f Format) NewID() string {
	if f == Mistral {
		return randomChars(9)
	}
	return "call_" + randomChars(24)
}
