package answer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Member is one key of a JSON object with its value's exact bytes.
type Member struct {
	Key string
	Val json.RawMessage
}

// Object is a JSON object kept in source order, each value as the exact
// bytes the peer sent. The router edits a few members of worker answers and
// client bodies (stream, max_tokens, n, seed, index, id, prompt_logprobs,
// the prompt's entries of logprobs.token_logprobs) and must leave
// everything else byte for byte as it was. Edits return a new Object; the
// one edited is left as it was.
type Object []Member

var errNotObject = errors.New("not a JSON object")

// ParseObject parses b, which must hold exactly one JSON object (with
// optional surrounding white space).
func ParseObject(b []byte) (Object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("parse json object: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("parse json object: %w", errNotObject)
	}
	var o Object
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
		o = append(o, Member{key, raw})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("parse json object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse json object: %w", errors.New("data after the object"))
	}
	return o, nil
}

// Get returns the value of key (the last one, as encoding/json reads
// duplicates) and whether it is present and not null.
func (o Object) Get(key string) (json.RawMessage, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Key == key {
			if IsNull(o[i].Val) {
				return nil, false
			}
			return o[i].Val, true
		}
	}
	return nil, false
}

// Set replaces key's value in place (dropping duplicates) or appends it.
func (o Object) Set(key string, val json.RawMessage) Object {
	out := o[:0:0]
	done := false
	for _, m := range o {
		if m.Key != key {
			out = append(out, m)
			continue
		}
		if !done {
			out = append(out, Member{key, val})
			done = true
		}
	}
	if !done {
		out = append(out, Member{key, val})
	}
	return out
}

// Del removes key.
func (o Object) Del(key string) Object {
	out := o[:0:0]
	for _, m := range o {
		if m.Key != key {
			out = append(out, m)
		}
	}
	return out
}

// Marshal writes the object compactly between members, each value as its
// original bytes.
func (o Object) Marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key) // a string always encodes
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.Val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// IsNull reports whether raw is the JSON null.
func IsNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// ParseArray splits a JSON array into its elements' raw bytes.
func ParseArray(raw json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("parse json array: %w", err)
	}
	if items == nil && !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		return nil, fmt.Errorf("parse json array: %w", errors.New("not an array"))
	}
	return items, nil
}

// MarshalArray joins raw elements into a JSON array.
func MarshalArray(items []json.RawMessage) json.RawMessage {
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

// EditChoices applies f to every object in o's "choices" array. A missing
// or null choices member is left alone.
func EditChoices(o Object, f func(i int, c Object) Object) (Object, error) {
	raw, ok := o.Get("choices")
	if !ok {
		return o, nil
	}
	items, err := ParseArray(raw)
	if err != nil {
		return nil, fmt.Errorf("edit choices: %w", err)
	}
	for i, it := range items {
		c, err := ParseObject(it)
		if err != nil {
			return nil, fmt.Errorf("edit choices[%d]: %w", i, err)
		}
		items[i] = f(i, c).Marshal()
	}
	return o.Set("choices", MarshalArray(items)), nil
}

// Quote encodes s as a JSON string.
func Quote(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}
