package sim

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"reflect"
	"slices"
	"sync"
	"tandem/internal/pd/room"
	"unsafe"
)

// State matching for the exhaustive search (see ExhaustiveOptions.Match).
//
// stateKey digests the whole world a schedule has reached: every node
// (its driver, room machines, engine fakes, pages and wire state), every
// request as the router holds it, the pending items, the clock, the random
// source, the fault budget spent and the checks' own records. It walks the
// world by reflection, so a field added later is covered without a change
// here; what it leaves out is listed in stateSkip and is history that
// cannot change what happens next or what a check concludes (statistics,
// traces, sequence numbers). Two states with equal keys have the same
// futures; a key that differs where the futures are the same only costs a
// merge the search could have made.
//
// The pending items are a set: what orders them is part of each item's
// digest (its rank among the items of its link, which deliver and write
// in order), not their place in the queue, which depends on the order in
// which independent options ran.

// stateKey is a 128-bit digest of a world.
type stateKey [2]uint64

// stateSkip lists, per struct type, the fields the digest leaves out.
var stateSkip = map[reflect.Type]map[string]bool{
	reflect.TypeFor[sim](): {
		"opts": true, "seq": true, "trace": true, "tracing": true, "names": true, "v": true, "st": true,
		"chooser": true, "fp": true, "local": true,
		// digested by stateKey: the queue as a set, the nodes and
		// requests by value (elsewhere a pointer to one is its index)
		"q": true, "nodes": true, "reqs": true,
	},
	reflect.TypeFor[item](): {"seq": true},
	// the checks' record of when a room ended, for the statistic of
	// frames sent after the end (between calls, an end is always in an
	// earlier call, so only whether a room ended matters, and the room's
	// tracks say that)
	reflect.TypeFor[node](): {"calls": true, "endedIn": true},
	// the room machines' counters (the gauges stay: live rooms by state,
	// tombstones, evictions, which the machine and the checks read)
	reflect.TypeFor[room.Counters](): {"events": true, "failures": true, "Successes": true, "Late": true, "Rejected": true, "Forgotten": true},
}

var stateSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// hasher writes what it walks into buf and digests it at the end; a map
// entry or a pending item is digested from its own stretch of buf, which
// is then dropped (their digests are summed, so order does not matter).
type hasher struct {
	buf  []byte
	path []uintptr // pointers being walked (a pointer back to one of them is a cycle)
}

func newHasher() *hasher { return &hasher{buf: make([]byte, 0, 4096)} }

// digest is the 128-bit digest of b.
func digest(b []byte) stateKey {
	return stateKey{maphash.Bytes(stateSeeds[0], b), maphash.Bytes(stateSeeds[1], b)}
}

func (hs *hasher) sum() stateKey { return digest(hs.buf) }

// from digests what was written since mark and drops it.
func (hs *hasher) from(mark int) stateKey {
	k := digest(hs.buf[mark:])
	hs.buf = hs.buf[:mark]
	return k
}

func (hs *hasher) u64(x uint64) {
	hs.buf = binary.LittleEndian.AppendUint64(hs.buf, x)
}

func (hs *hasher) bytes(b []byte) {
	hs.u64(uint64(len(b)))
	hs.buf = append(hs.buf, b...)
}

// fieldsOf lists the fields of struct type t the digest reads (stateSkip
// left out).
var fieldCache sync.Map // reflect.Type -> []int

func fieldsOf(t reflect.Type) []int {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]int)
	}
	skip := stateSkip[t]
	var fs []int
	for i := range t.NumField() {
		if !skip[t.Field(i).Name] {
			fs = append(fs, i)
		}
	}
	fieldCache.Store(t, fs)
	return fs
}

var (
	nodePtr    = reflect.TypeFor[*node]()
	requestPtr = reflect.TypeFor[*request]()
	simPtr     = reflect.TypeFor[*sim]()
	bytesType  = reflect.TypeFor[[]byte]()
)

func (hs *hasher) walk(v reflect.Value) {
	if !v.IsValid() {
		hs.u64(0xdead)
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			hs.u64(1)
		} else {
			hs.u64(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		hs.u64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		hs.u64(v.Uint())
	case reflect.Float32, reflect.Float64:
		hs.u64(math.Float64bits(v.Float()))
	case reflect.String:
		s := v.String()
		hs.bytes(unsafe.Slice(unsafe.StringData(s), len(s)))
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 && v.CanAddr() {
			hs.bytes(v.Bytes())
			return
		}
		for i := range v.Len() {
			hs.walk(v.Index(i))
		}
	case reflect.Slice:
		if v.IsNil() {
			hs.u64(0xa11)
			return
		}
		if v.Type() == bytesType || v.Type().Elem().Kind() == reflect.Uint8 {
			hs.bytes(v.Bytes())
			return
		}
		hs.u64(uint64(v.Len()))
		for i := range v.Len() {
			hs.walk(v.Index(i))
		}
	case reflect.Struct:
		for _, i := range fieldsOf(v.Type()) {
			hs.walk(v.Field(i))
		}
	case reflect.Map:
		if v.IsNil() {
			hs.u64(0xa11)
			return
		}
		var acc stateKey
		it := v.MapRange()
		for it.Next() {
			mark := len(hs.buf)
			hs.walk(it.Key())
			hs.walk(it.Value())
			k := hs.from(mark)
			acc[0] += k[0]
			acc[1] += k[1]
		}
		hs.u64(uint64(v.Len()))
		hs.u64(acc[0])
		hs.u64(acc[1])
	case reflect.Pointer:
		if v.IsNil() {
			hs.u64(0xa11)
			return
		}
		// The world's own objects by identity: a node by its index, a
		// request by its index (each is digested once, from the sim).
		switch v.Type() {
		case nodePtr:
			hs.u64(0x40de<<32 | uint64((*node)(v.UnsafePointer()).idx))
			return
		case requestPtr:
			hs.u64(0x2e9<<32 | uint64((*request)(v.UnsafePointer()).idx))
			return
		case simPtr:
			hs.u64(0x5117)
			return
		}
		p := v.Pointer()
		if i := slices.Index(hs.path, p); i >= 0 {
			hs.u64(0xc1c1e<<32 | uint64(i)) // a cycle: the i-th pointer on the path
			return
		}
		hs.path = append(hs.path, p)
		hs.walk(v.Elem())
		hs.path = hs.path[:len(hs.path)-1]
	case reflect.Interface:
		if v.IsNil() {
			hs.u64(0xa11)
			return
		}
		e := v.Elem()
		hs.bytes([]byte(e.Type().String()))
		hs.walk(e)
	case reflect.Func:
		// Closures: whether one is set (what they capture is reached
		// through the world itself).
		if v.IsNil() {
			hs.u64(0)
		} else {
			hs.u64(1)
		}
	case reflect.Chan, reflect.UnsafePointer:
		hs.u64(uint64(v.Kind()))
	default:
		panic("statehash: unhandled kind " + v.Kind().String())
	}
}

// itemKey digests a pending item, with its rank among the items it must
// follow (rank), but not its sequence number.
func (hs *hasher) itemKey(it *item, rank int, what byte) stateKey {
	mark := len(hs.buf)
	hs.walk(reflect.ValueOf(it).Elem())
	hs.u64(uint64(rank))
	hs.u64(uint64(what))
	return hs.from(mark)
}

// orderClass names the items a pending item must follow: frames on one
// link and Sent completions of one link, in the order they were
// scheduled; others follow nothing (ok false).
func orderClass(it *item) (key [3]int32, ok bool) {
	switch it.kind {
	case itemFrame:
		return [3]int32{int32(it.kind), it.from, it.node}, true
	case itemSent:
		return [3]int32{int32(it.kind), it.node, it.peer}, true
	}
	return key, false
}

// itemKeys returns each pending item's digest (with what, 'r' here; the
// caller re-digests for other options) in the queue's order.
func (s *sim) itemKeys() []stateKey {
	ranks := map[[3]int32]int{}
	hs := newHasher()
	keys := make([]stateKey, len(s.q))
	for i := range s.q {
		it := &s.q[i]
		rank := 0
		if c, ok := orderClass(it); ok {
			rank = ranks[c]
			ranks[c] = rank + 1
		}
		keys[i] = hs.itemKey(it, rank, 0)
	}
	return keys
}

// stateKey digests the world (with the faults spent so far).
func (s *sim) stateKey(items []stateKey, faults int) stateKey {
	hs := newHasher()
	hs.walk(reflect.ValueOf(s).Elem())
	for _, n := range s.nodes {
		hs.walk(reflect.ValueOf(n).Elem())
	}
	for _, r := range s.reqs {
		hs.walk(reflect.ValueOf(r).Elem())
	}
	var acc stateKey
	for _, k := range items {
		acc[0] += k[0]
		acc[1] += k[1]
	}
	hs.u64(uint64(len(items)))
	hs.u64(acc[0])
	hs.u64(acc[1])
	hs.u64(uint64(faults))
	return hs.sum()
}
