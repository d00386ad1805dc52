package answer

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		limit int
		want  []string // data of each event ("-" for an event without data)
		raws  []string // raw bytes of each event, when checked
		err   error    // after the events
	}{
		{name: "two events", in: "data: a\n\ndata: b\n\n", limit: 100, want: []string{"a", "b"}, raws: []string{"data: a\n\n", "data: b\n\n"}, err: io.EOF},
		{name: "crlf and multi-line data", in: "data: a\r\ndata:b\r\n\r\n", limit: 100, want: []string{"a\nb"}, raws: []string{"data: a\r\ndata:b\r\n\r\n"}, err: io.EOF},
		{name: "comment and fields kept raw", in: ": ping\nevent: x\nid: 3\ndata: {}\n\n", limit: 100, want: []string{"{}"}, raws: []string{": ping\nevent: x\nid: 3\ndata: {}\n\n"}, err: io.EOF},
		{name: "comment only", in: ": ping\n\n", limit: 100, want: []string{"-"}, err: io.EOF},
		{name: "cut inside an event", in: "data: a\n\ndata: b\n", limit: 100, want: []string{"a"}, err: io.ErrUnexpectedEOF},
		{name: "cut inside a line", in: "data: a", limit: 100, err: io.ErrUnexpectedEOF},
		{name: "event over the limit", in: "data: " + strings.Repeat("x", 50) + "\n\n", limit: 20, err: ErrEventTooLong},
		{name: "many lines over the limit", in: strings.Repeat("data: x\n", 10) + "\n", limit: 40, err: ErrEventTooLong},
		{name: "empty", in: "", limit: 100, err: io.EOF},
	}
	for _, tc := range cases {
		r := NewReader(strings.NewReader(tc.in), tc.limit)
		var got, raws []string
		var err error
		for {
			var ev Event
			ev, err = r.Next()
			if err != nil {
				break
			}
			raws = append(raws, string(ev.Raw))
			if ev.HasData {
				got = append(got, string(ev.Data))
			} else {
				got = append(got, "-")
			}
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || !errors.Is(err, tc.err) {
			t.Errorf("%s: events %q then %v, want %q then %v", tc.name, got, err, tc.want, tc.err)
		}
		if tc.raws != nil && strings.Join(raws, "") != strings.Join(tc.raws, "") {
			t.Errorf("%s: raw events %q, want %q", tc.name, raws, tc.raws)
		}
	}
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "data: [DONE]\n\n", ": c\r\n\r\ndata: {}\n\n", "data: x", "\n\n\n", "data:" + strings.Repeat("y", 300) + "\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 256
		r := NewReader(bytes.NewReader(in), limit)
		var raw []byte
		for range len(in) + 1 { // every event takes at least one byte
			ev, err := r.Next()
			if err != nil {
				if errors.Is(err, io.EOF) && !bytes.Equal(raw, in) {
					t.Fatalf("clean end after %q, but the input was %q", raw, in)
				}
				return
			}
			if len(ev.Raw) > limit || len(ev.Data) > len(ev.Raw) {
				t.Fatalf("event raw %d bytes, data %d bytes: over the limit %d or data longer than raw", len(ev.Raw), len(ev.Data), limit)
			}
			raw = append(raw, ev.Raw...)
		}
		t.Fatalf("more events than input bytes in %q", in)
	})
}
