package answer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrEventTooLong reports a server-sent event over the reader's limit.
var ErrEventTooLong = errors.New("server-sent event too long")

// Event is one server-sent event as the server wrote it: Raw holds every
// line of it, terminators and the blank line that ends it included, so it
// can be forwarded byte for byte; Data is its data lines' values joined
// with "\n" (HasData false when it had none, as a comment-only event).
type Event struct {
	Raw     []byte
	Data    []byte
	HasData bool
}

// Reader splits a text/event-stream body into events. Lines end with "\n"
// or "\r\n" (a lone "\r" does not end a line here; no server it reads
// writes one: Tandem's workers, or an OpenAI-compatible endpoint).
// An event longer than its limit is an error, so memory stays bounded
// whatever the peer sends.
type Reader struct {
	r   *bufio.Reader
	max int
}

// NewReader reads events from r, each at most limit bytes (Event.Raw's
// length: its lines with their terminators and the blank line).
func NewReader(r io.Reader, limit int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, min(64<<10, max(limit, 16))), max: limit}
}

// Next returns the next event. A clean end between events is io.EOF; a
// stream that ends inside an event is io.ErrUnexpectedEOF (the event is
// not returned: a server-sent event counts only once its blank line came);
// an event over the limit is ErrEventTooLong.
func (s *Reader) Next() (Event, error) {
	var ev Event
	for {
		line, err := s.line(len(ev.Raw))
		if err != nil {
			if errors.Is(err, io.EOF) && len(ev.Raw) > 0 {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		ev.Raw = append(ev.Raw, line...)
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(text) == 0 {
			return ev, nil
		}
		field, value, _ := bytes.Cut(text, []byte(":"))
		if string(field) != "data" {
			continue // comments, event:, id:, retry:
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if ev.HasData {
			ev.Data = append(ev.Data, '\n')
		}
		ev.Data = append(ev.Data, value...)
		ev.HasData = true
	}
}

// line returns the next line with its terminator; used bytes of the event
// are already taken, and the line may use what is left of the limit.
func (s *Reader) line(used int) ([]byte, error) {
	var long []byte
	for {
		frag, err := s.r.ReadSlice('\n')
		if len(long)+len(frag)+used > s.max {
			return nil, fmt.Errorf("read event stream: %w (over %d bytes)", ErrEventTooLong, s.max)
		}
		switch {
		case err == nil:
			if long != nil {
				return append(long, frag...), nil
			}
			return append([]byte(nil), frag...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			long = append(long, frag...)
		case errors.Is(err, io.EOF):
			if len(long)+len(frag) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// Frame frames data as one server-sent event: "data: " + data + "\n\n".
// data must not hold a line break (a JSON document written compactly, or
// [DONE]).
func Frame(data []byte) []byte {
	b := make([]byte, 0, len(data)+8)
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
