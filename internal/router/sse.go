package router

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errEventTooLong reports a server-sent event over the reader's limit.
var errEventTooLong = errors.New("server-sent event too long")

// sseEvent is one server-sent event as a worker wrote it: raw holds every
// line of it, terminators and the blank line that ends it included, so it
// can be forwarded byte for byte; data is its data lines' values joined
// with "\n" (hasData false when it had none, as a comment-only event).
type sseEvent struct {
	raw     []byte
	data    []byte
	hasData bool
}

// sseReader splits a text/event-stream body into events. Lines end with
// "\n" or "\r\n" (a lone "\r" does not end a line here; no worker writes
// one). An event longer than max bytes is an error, so memory stays bounded
// whatever the peer sends.
type sseReader struct {
	r   *bufio.Reader
	max int
}

func newSSEReader(r io.Reader, limit int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, min(64<<10, max(limit, 16))), max: limit}
}

// next returns the next event. A clean end between events is io.EOF; a
// stream that ends inside an event is io.ErrUnexpectedEOF.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.line(len(ev.raw))
		if err != nil {
			if errors.Is(err, io.EOF) && len(ev.raw) > 0 {
				return sseEvent{}, io.ErrUnexpectedEOF
			}
			return sseEvent{}, err
		}
		ev.raw = append(ev.raw, line...)
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(text) == 0 {
			return ev, nil
		}
		field, value, _ := bytes.Cut(text, []byte(":"))
		if string(field) != "data" {
			continue // comments, event:, id:, retry:
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if ev.hasData {
			ev.data = append(ev.data, '\n')
		}
		ev.data = append(ev.data, value...)
		ev.hasData = true
	}
}

// line returns the next line with its terminator; used bytes of the event
// are already taken, and the line may use what is left of the limit.
func (s *sseReader) line(used int) ([]byte, error) {
	var long []byte
	for {
		frag, err := s.r.ReadSlice('\n')
		if len(long)+len(frag)+used > s.max {
			return nil, fmt.Errorf("read event stream: %w (over %d bytes)", errEventTooLong, s.max)
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
