package loadgen

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  error // error after the events
	}{
		{"simple", "data: a\n\ndata: b\n\n", []string{"a", "b"}, io.EOF},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, io.EOF},
		{"no space after colon", "data:a\n\n", []string{"a"}, io.EOF},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}, io.EOF},
		{"comments and other fields", ": ping\nevent: x\nid: 3\nretry: 10\ndata: a\n\n: ping\n\n", []string{"a"}, io.EOF},
		{"no blank line at the end", "data: a\n\ndata: b\n", []string{"a", "b"}, io.EOF},
		{"line cut off", "data: a\n\ndata: {\"x", []string{"a"}, io.ErrUnexpectedEOF},
		{"empty", "", nil, io.EOF},
		{"only blank lines", "\n\n\n", nil, io.EOF},
		{"empty data", "data:\n\n", []string{""}, io.EOF},
	}
	for _, tc := range tests {
		r := newSSEReader(strings.NewReader(tc.in), 64)
		var got []string
		var err error
		for {
			var d []byte
			d, err = r.next()
			if err != nil {
				break
			}
			got = append(got, string(d))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("sseReader(%s) events = %q, want %q", tc.name, got, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("sseReader(%s) final error = %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestSSEReaderLimits(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"long line", "data: " + strings.Repeat("x", 100) + "\n\n"},
		{"long event from short lines", strings.Repeat("data: 0123456789\n", 10) + "\n"},
	}
	for _, tc := range tests {
		r := newSSEReader(strings.NewReader(tc.in), 64)
		_, err := r.next()
		if !errors.Is(err, errLineTooLong) {
			t.Errorf("sseReader(%s, limit 64).next() error = %v, want %v", tc.name, err, errLineTooLong)
		}
	}
	// Just under the limit is fine, also when it needs several buffer fills.
	line := "data: " + strings.Repeat("y", 58) + "\n\n"
	r := newSSEReader(strings.NewReader(line), 64)
	if d, err := r.next(); err != nil || len(d) != 58 {
		t.Errorf("sseReader(64-byte line, limit 64).next() = %d bytes, %v; want 58 bytes, nil", len(d), err)
	}
}
