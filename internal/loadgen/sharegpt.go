package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"
)

// ShareGPT filters, as vLLM's benchmark applies them (is_valid_sequence):
// a conversation is used when its prompt has at least 4 tokens and at most
// 1024, its output at least 4 (unless the output length is fixed), and both
// together at most 2048.
const (
	shareGPTMinLen       = 4
	shareGPTMaxPromptLen = 1024
	shareGPTMaxTotalLen  = 2048
	// MaxShareGPTBytes caps a ShareGPT file (the usual
	// ShareGPT_V3_unfiltered_cleaned_split.json is 673 MB).
	MaxShareGPTBytes = 4 << 30
)

// TokenCounter counts the tokens of a text as the served model's tokenizer
// does (with its special tokens, as a prompt is sent). It returns
// ErrTooLong for a text too long to count, which the ShareGPT filter
// then drops.
type TokenCounter func(ctx context.Context, text string) (int, error)

// ErrTooLong is what a TokenCounter returns for a text too long to count.
var ErrTooLong = errors.New("text too long to count")

// ReadShareGPTFile reads a ShareGPT file; see ReadShareGPT.
func ReadShareGPTFile(ctx context.Context, path string, n int, seed uint64, outputLen int, count TokenCounter) ([]Item, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxShareGPTBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dataset %s: read: %w", path, err)
	}
	if len(data) > MaxShareGPTBytes {
		return nil, fmt.Errorf("dataset %s: over %d bytes", path, int64(MaxShareGPTBytes))
	}
	items, err := ReadShareGPT(ctx, data, n, seed, outputLen, count)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	return items, nil
}

// conversation is the part of a ShareGPT entry a benchmark uses: its first
// two turns' texts (the human's prompt and the model's answer).
type conversation struct {
	prompt, completion string
}

// ReadShareGPT returns n requests from a ShareGPT dataset as vLLM's
// `--dataset-name sharegpt` makes them: data is one JSON array of
// {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt",
// "value": "..."}, ...]}; entries with fewer than two turns are skipped,
// the rest shuffled by seed; each in turn gives a prompt (turn 0) whose
// token count is counted, and max_tokens the token count of turn 1 (or
// outputLen when positive); entries outside the length filter (see
// shareGPTMinLen) are skipped, until n are taken; fewer reusable entries
// than n are reused in turn (vLLM oversamples). A malformed file is an error
// naming the entry, its line and what is wrong.
func ReadShareGPT(ctx context.Context, data []byte, n int, seed uint64, outputLen int, count TokenCounter) ([]Item, error) {
	convs, err := parseShareGPT(data)
	if err != nil {
		return nil, err
	}
	if len(convs) == 0 {
		return nil, errors.New("no entry has two turns of conversation: nothing to send")
	}
	r := rand.New(rand.NewPCG(seed, 0x73686172)) // "shar"
	r.Shuffle(len(convs), func(i, j int) { convs[i], convs[j] = convs[j], convs[i] })
	var picked []Item
	for _, c := range convs {
		if len(picked) >= n {
			break
		}
		in, err := count(ctx, c.prompt)
		if errors.Is(err, ErrTooLong) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("count prompt tokens: %w", err)
		}
		out := outputLen
		if out <= 0 {
			if out, err = count(ctx, c.completion); errors.Is(err, ErrTooLong) {
				continue
			} else if err != nil {
				return nil, fmt.Errorf("count output tokens: %w", err)
			}
		}
		if in < shareGPTMinLen || (outputLen <= 0 && out < shareGPTMinLen) || in > shareGPTMaxPromptLen || in+out > shareGPTMaxTotalLen {
			continue
		}
		picked = append(picked, Item{Prompt: c.prompt, InputLen: in, MaxTokens: min(out, maxGenTokens)})
	}
	if len(picked) == 0 {
		return nil, fmt.Errorf("none of the %d conversations passes the length filter (prompt %d to %d tokens, output at least %d, together at most %d)",
			len(convs), shareGPTMinLen, shareGPTMaxPromptLen, shareGPTMinLen, shareGPTMaxTotalLen)
	}
	items := make([]Item, n)
	for i := range items {
		items[i] = picked[i%len(picked)]
	}
	return items, nil
}

// parseShareGPT reads the conversations of a ShareGPT file, naming the
// entry and line of the first malformed one.
func parseShareGPT(data []byte) ([]conversation, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	where := func(off int64) string {
		off = min(max(off, 0), int64(len(data)))
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
		return fmt.Sprintf("line %d column %d", line, col)
	}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("%s: not valid JSON: %v", where(se.Offset), se)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("the file ends inside the JSON array (%s): is it cut short?", where(int64(len(data))))
		}
		return err
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty: a ShareGPT file is one JSON array of {\"conversations\": [...]}")
		}
		return nil, syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		hint := ""
		if d, ok := tok.(json.Delim); ok && d == '{' {
			hint = " (a JSON Lines file of {\"prompt\": ...} objects is read without --dataset-name sharegpt)"
		}
		return nil, fmt.Errorf("a ShareGPT file is one JSON array of {\"conversations\": [...]} entries, but it starts with %s%s", describeToken(tok), hint)
	}
	var out []conversation
	for i := 0; dec.More(); i++ {
		if i >= maxDatasetItems {
			return nil, fmt.Errorf("more than %d entries", maxDatasetItems)
		}
		// The entry starts after the separator and blanks that precede it.
		start := dec.InputOffset()
		off := start + int64(len(data[start:])-len(bytes.TrimLeft(data[start:], ", \t\r\n")))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			// The decoder counts a syntax error's offset from where its
			// scan of the value began; scan the entry alone to place it.
			var se *json.SyntaxError
			if errors.As(err, &se) {
				if e2 := json.NewDecoder(bytes.NewReader(data[off:])).Decode(&raw); errors.As(e2, &se) {
					return nil, fmt.Errorf("entry %d (%s): not valid JSON: %v", i, where(off+se.Offset-1), se)
				}
			}
			return nil, syntax(err)
		}
		c, ok, err := shareGPTEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("entry %d (%s): %w", i, where(off), err)
		}
		if ok {
			out = append(out, c)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntax(err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more JSON after the array", where(dec.InputOffset()))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: more JSON after the array", where(dec.InputOffset()))
	}
	return out, nil
}

// shareGPTEntry reads one entry: ok false when it has fewer than two turns
// (vLLM skips those too).
func shareGPTEntry(raw json.RawMessage) (conversation, bool, error) {
	var e map[string]json.RawMessage
	if err := json.Unmarshal(raw, &e); err != nil {
		return conversation{}, false, fmt.Errorf("want an object with \"conversations\", got %s", describe(raw))
	}
	cs, ok := e["conversations"]
	if !ok {
		return conversation{}, false, errors.New(`no "conversations" field (want {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]})`)
	}
	var turns []json.RawMessage
	if err := json.Unmarshal(cs, &turns); err != nil {
		return conversation{}, false, fmt.Errorf(`"conversations" is %s, want an array of {"from": ..., "value": "..."}`, describe(cs))
	}
	if len(turns) < 2 {
		return conversation{}, false, nil
	}
	var texts [2]string
	for k := range texts {
		var t map[string]json.RawMessage
		if err := json.Unmarshal(turns[k], &t); err != nil {
			return conversation{}, false, fmt.Errorf(`conversations[%d] is %s, want {"from": ..., "value": "..."}`, k, describe(turns[k]))
		}
		v, ok := t["value"]
		if !ok {
			return conversation{}, false, fmt.Errorf(`conversations[%d] has no "value" (the turn's text)`, k)
		}
		if err := json.Unmarshal(v, &texts[k]); err != nil || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return conversation{}, false, fmt.Errorf(`conversations[%d].value is %s, want a string`, k, describe(v))
		}
	}
	return conversation{texts[0], texts[1]}, true, nil
}

// describe names the JSON type of a value, for error messages.
func describe(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "empty"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return "'" + v.String() + "'"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// ServerTokenCounter counts tokens with the server's POST /tokenize
// (Tandem's and vLLM's {"model", "prompt"} -> {"count"}), with the special
// tokens a prompt gets. A 400 context_length_exceeded answer is ErrTooLong.
func ServerTokenCounter(server, apiKey, model string, timeout time.Duration) (TokenCounter, error) {
	base, err := baseURL(server)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("token counting timeout %v must be positive", timeout)
	}
	client := newClient(1)
	return func(ctx context.Context, text string) (int, error) {
		body, err := json.Marshal(map[string]any{"model": model, "prompt": text})
		if err != nil {
			return 0, err
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, base+"/tokenize", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		if apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, fmt.Errorf("POST %s/tokenize: %w", base, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
		if err != nil {
			return 0, fmt.Errorf("POST %s/tokenize: read: %w", base, err)
		}
		var v struct {
			Count *int `json:"count"`
			Error *struct {
				Message string `json:"message"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &v)
		if resp.StatusCode == http.StatusBadRequest && v.Error != nil && v.Error.Code == "context_length_exceeded" {
			return 0, ErrTooLong
		}
		if resp.StatusCode != http.StatusOK || v.Count == nil {
			msg := strings.TrimSpace(clip(string(b), 200))
			if v.Error != nil {
				msg = clip(v.Error.Message, 200)
			}
			return 0, fmt.Errorf("POST %s/tokenize answered %s (%s): the ShareGPT output lengths need the model's tokenizer; give --tokenizer MODEL, or fix them with --sharegpt-output-len N", base, resp.Status, msg)
		}
		return *v.Count, nil
	}, nil
}
