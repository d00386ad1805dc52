package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errLineTooLong reports an SSE line longer than the reader's limit.
var errLineTooLong = errors.New("server-sent event line too long")

// sseReader splits a text/event-stream body into events and returns the
// data of each (its data: lines joined with "\n"). Other fields (event:,
// id:, retry:) and comments are skipped. Lines end with "\n" or "\r\n"; a
// line longer than max bytes is an error, so memory stays bounded.
type sseReader struct {
	r   *bufio.Reader
	max int
}

func newSSEReader(r io.Reader, limit int) *sseReader {
	size := min(64<<10, max(limit, 16))
	return &sseReader{r: bufio.NewReaderSize(r, size), max: limit}
}

// line returns the next line without its ending. A last line without a
// newline is incomplete (the connection broke mid-line) and is reported as
// io.ErrUnexpectedEOF; a clean end is io.EOF.
func (s *sseReader) line() ([]byte, error) {
	var long []byte
	for {
		frag, err := s.r.ReadSlice('\n')
		if err == nil {
			if long != nil {
				long = append(long, frag...)
				frag = long
			}
			if len(frag) > s.max+2 {
				return nil, fmt.Errorf("read event stream: %w (over %d bytes)", errLineTooLong, s.max)
			}
			frag = bytes.TrimSuffix(frag[:len(frag)-1], []byte("\r"))
			return frag, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(frag) > s.max+2 {
				return nil, fmt.Errorf("read event stream: %w (over %d bytes)", errLineTooLong, s.max)
			}
			long = append(long, frag...)
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(long)+len(frag) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, io.EOF
		}
		return nil, err
	}
}

// next returns the data of the next event that has any. At the end of the
// stream it returns io.EOF, after first dispatching data whose terminating
// blank line never came.
func (s *sseReader) next() ([]byte, error) {
	var data []byte
	have := false
	for {
		ln, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && have {
				return data, nil
			}
			return nil, err
		}
		if len(ln) == 0 {
			if have {
				return data, nil
			}
			continue
		}
		if ln[0] == ':' {
			continue // comment (keep-alive)
		}
		field, value, found := bytes.Cut(ln, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(field) != "data" {
			continue
		}
		if have {
			if len(data)+1+len(value) > s.max {
				return nil, fmt.Errorf("read event stream: %w (event data over %d bytes)", errLineTooLong, s.max)
			}
			data = append(data, '\n')
		}
		data = append(data, value...)
		have = true
	}
}
