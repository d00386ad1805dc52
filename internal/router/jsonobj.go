package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// member is one key of a JSON object with its value's exact bytes.
type member struct {
	key string
	val json.RawMessage
}

// object is a JSON object kept in source order, each value as the exact
// bytes the peer sent. The router edits a few members of worker answers and
// client bodies (stream, max_tokens, n, seed, index, id, prompt_logprobs,
// the prompt's entries of logprobs.token_logprobs) and must leave everything else byte for byte as it was.
type object []member

var errNotObject = errors.New("not a JSON object")

// parseObject parses b, which must hold exactly one JSON object (with
// optional surrounding white space).
func parseObject(b []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("parse json object: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("parse json object: %w", errNotObject)
	}
	var o object
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parse json object: %w", err)
		}
		key, ok := t.(string)
		if !ok { // cannot happen: the decoder only yields strings as keys
			return nil, fmt.Errorf("parse json object: %w", errNotObject)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("parse json object member %q: %w", key, err)
		}
		o = append(o, member{key, raw})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("parse json object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse json object: %w", errors.New("data after the object"))
	}
	return o, nil
}

// get returns the value of key (the last one, as encoding/json reads
// duplicates) and whether it is present and not null.
func (o object) get(key string) (json.RawMessage, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].key == key {
			if isNull(o[i].val) {
				return nil, false
			}
			return o[i].val, true
		}
	}
	return nil, false
}

// set replaces key's value in place (dropping duplicates) or appends it.
func (o object) set(key string, val json.RawMessage) object {
	out := o[:0:0]
	done := false
	for _, m := range o {
		if m.key != key {
			out = append(out, m)
			continue
		}
		if !done {
			out = append(out, member{key, val})
			done = true
		}
	}
	if !done {
		out = append(out, member{key, val})
	}
	return out
}

// del removes key.
func (o object) del(key string) object {
	out := o[:0:0]
	for _, m := range o {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

// marshal writes the object compactly between members, each value as its
// original bytes.
func (o object) marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key) // a string always encodes
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// isNull reports whether raw is the JSON null.
func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// parseArray splits a JSON array into its elements' raw bytes.
func parseArray(raw json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("parse json array: %w", err)
	}
	if items == nil && !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		return nil, fmt.Errorf("parse json array: %w", errors.New("not an array"))
	}
	return items, nil
}

// marshalArray joins raw elements into a JSON array.
func marshalArray(items []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// editChoices applies f to every object in o's "choices" array. A missing
// or null choices member is left alone.
func editChoices(o object, f func(i int, c object) object) (object, error) {
	raw, ok := o.get("choices")
	if !ok {
		return o, nil
	}
	items, err := parseArray(raw)
	if err != nil {
		return nil, fmt.Errorf("edit choices: %w", err)
	}
	for i, it := range items {
		c, err := parseObject(it)
		if err != nil {
			return nil, fmt.Errorf("edit choices[%d]: %w", i, err)
		}
		items[i] = f(i, c).marshal()
	}
	return o.set("choices", marshalArray(items)), nil
}
