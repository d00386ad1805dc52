package kvwire_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the FuzzReadFrame seed corpus in testdata/fuzz/FuzzReadFrame")

// seedDir holds the FuzzReadFrame seed corpus, which go test also runs as
// ordinary test cases.
const seedDir = "testdata/fuzz/FuzzReadFrame"

// fuzzSeeds returns the seed corpus by file name: one valid frame of every
// type, a KV frame with data, and broken variants.
func fuzzSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	for _, p := range examples() {
		id := room.ID{}
		if p.Type().HasRoom() {
			id = testRoom
		}
		payload := p.AppendTo(nil)
		if p.Type() == kvwire.TypeKV {
			payload = append(payload, "some page bytes"...)
		}
		frame := kvwire.AppendFrame(nil, p.Type(), id, payload)
		seeds["valid-"+p.Type().String()] = frame
	}
	alloc := seeds["valid-ALLOC"]
	seeds["truncated-alloc"] = alloc[:len(alloc)-3]
	bad := bytes.Clone(alloc)
	bad[kvwire.HeaderBytes] = 0xff // page count far past the payload
	seeds["alloc-count"] = bad
	seeds["bad-magic"] = []byte("GET / HTTP/1.1\r\nHost: tandem\r\n\r\n")
	wrongVersion := bytes.Clone(seeds["valid-DONE"])
	wrongVersion[4] = kvwire.VersionPlaintext
	seeds["bad-version"] = wrongVersion
	twoFrames := append(bytes.Clone(seeds["valid-HEARTBEAT"]), seeds["valid-FIRST_TOKEN"]...)
	seeds["two-frames"] = twoFrames
	return seeds
}

func seedFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
}

func TestFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds()
	if *updateSeeds {
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			if err := os.WriteFile(filepath.Join(seedDir, name), seedFile(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range seeds {
		got, err := os.ReadFile(filepath.Join(seedDir, name))
		if err != nil || !bytes.Equal(got, seedFile(b)) {
			t.Errorf("seed %s is missing or stale (%v); run go test -run TestFuzzSeeds -update-seeds ./internal/kvwire/", name, err)
		}
	}
}

// FuzzReadFrame reads frames from arbitrary bytes the way a connection
// does (header, then the payload its length announces) and runs every
// payload decoder on the raw bytes too. Nothing may panic; every failure
// must wrap a sentinel; whatever decodes must re-encode to the same bytes
// (the encoding is canonical) and hold no more items than its bytes allow.
func FuzzReadFrame(f *testing.F) {
	for _, b := range fuzzSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf [kvwire.HeaderBytes]byte
		for frames := 0; frames < 4; frames++ {
			h, err := kvwire.ReadHeader(r, &buf)
			if err != nil {
				if !isSentinel(err) {
					t.Fatalf("ReadHeader: unclassified error %v", err)
				}
				break
			}
			if int(h.Length) > h.Type.PayloadBytesMax() || int(h.Length) < h.Type.PayloadBytesMin() {
				t.Fatalf("ReadHeader accepted length %d for %v", h.Length, h.Type)
			}
			if int64(h.Length) > int64(r.Len()) {
				break // a connection would wait for more bytes
			}
			payload := make([]byte, h.Length)
			io.ReadFull(r, payload)
			_ = h.VerifyChecksum(payload)
			checkDecode(t, h.Type, payload)
		}
		for typ := kvwire.TypeAuthHello; typ.Valid(); typ++ {
			checkDecode(t, typ, data)
		}
	})
}

func isSentinel(err error) bool {
	for _, s := range []error{io.EOF, io.ErrUnexpectedEOF, kvwire.ErrMagic, kvwire.ErrVersion, kvwire.ErrType, kvwire.ErrTooLarge, kvwire.ErrMalformed, kvwire.ErrChecksum} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func checkDecode(t *testing.T, typ kvwire.Type, b []byte) {
	p, err := kvwire.DecodePayload(typ, b)
	if err != nil {
		if !errors.Is(err, kvwire.ErrMalformed) {
			t.Fatalf("DecodePayload(%v): error %v does not wrap ErrMalformed", typ, err)
		}
		return
	}
	want := b
	if typ == kvwire.TypeKV {
		want = b[:kvwire.KVSubHeaderBytes]
	}
	if (typ == kvwire.TypeAbort || typ == kvwire.TypeFailed) && len(b) > 0 && b[0] != 0 && kvwire.ReasonFromWire(b[0]) == room.ReasonNone {
		// A reason this node does not know (a newer peer's) reads as none.
		want = append([]byte{0}, b[1:]...)
	}
	if got := p.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("%v: AppendTo(Decode(%x)) = %x, not canonical", typ, want, got)
	}
	switch v := p.(type) {
	case *kvwire.Alloc:
		if 4+4*len(v.Pages) != len(b) {
			t.Fatalf("ALLOC of %d bytes decoded %d pages", len(b), len(v.Pages))
		}
	case *kvwire.FirstToken:
		if len(v.Top) > kvwire.TopLogprobsMax {
			t.Fatalf("FIRST_TOKEN decoded %d alternatives", len(v.Top))
		}
	}
}
