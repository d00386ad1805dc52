package jinja

import (
	"math"
	"strconv"
	"strings"
)

// Dict is an ordered dictionary, as Python's dict: keys keep their
// insertion order, and keys that compare equal (1, 1.0 and True) are one
// key.
type Dict struct {
	keys []Value
	vals []Value
	idx  map[hkey]int // built once the dict has more than dictIndexMin keys
}

const dictIndexMin = 8

// hkey is a hashable form of a key: numbers that compare equal hash
// equal, as in Python.
type hkey struct {
	kind Kind
	n    int64
	s    string
}

// NewDict returns an empty dict.
func NewDict() *Dict { return &Dict{} }

// newDictCap returns an empty dict with room for n keys.
func newDictCap(n int) *Dict {
	return &Dict{keys: make([]Value, 0, n), vals: make([]Value, 0, n)}
}

// DictValue wraps d as a value.
func DictValue(d *Dict) Value { return Value{kind: KindDict, ref: d} }

// Len returns the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// hashKey returns the hashable form of v; ok is false for values Python
// cannot hash (lists, dicts).
func hashKey(v Value, depth int) (hkey, bool) {
	switch v.kind {
	case KindBool, KindInt:
		return hkey{kind: KindInt, n: v.n}, true
	case KindFloat:
		f := v.float()
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return hkey{kind: KindInt, n: int64(f)}, true
		}
		return hkey{kind: KindFloat, n: v.n}, true
	case KindString:
		return hkey{kind: KindString, s: v.s}, true
	case KindNone, KindUndefined:
		return hkey{kind: v.kind}, true
	case KindTuple:
		if depth > 64 {
			return hkey{}, false
		}
		var b strings.Builder
		for _, it := range v.list().Items {
			k, ok := hashKey(it, depth+1)
			if !ok {
				return hkey{}, false
			}
			b.WriteString(strconv.Itoa(int(k.kind)))
			b.WriteByte(':')
			b.WriteString(strconv.FormatInt(k.n, 10))
			b.WriteByte(':')
			b.WriteString(strconv.Quote(k.s))
			b.WriteByte(',')
		}
		return hkey{kind: KindTuple, s: b.String()}, true
	}
	return hkey{}, false
}

func (d *Dict) find(k hkey) int {
	if d.idx != nil {
		if i, ok := d.idx[k]; ok {
			return i
		}
		return -1
	}
	for i, key := range d.keys {
		if hk, ok := hashKey(key, 0); ok && hk == k {
			return i
		}
	}
	return -1
}

// findStr finds a string key without building its hkey.
func (d *Dict) findStr(k string) int {
	if d.idx != nil {
		if i, ok := d.idx[hkey{kind: KindString, s: k}]; ok {
			return i
		}
		return -1
	}
	for i := range d.keys {
		if key := &d.keys[i]; key.kind == KindString && key.s == k {
			return i
		}
	}
	return -1
}

// Get returns the value of key k.
func (d *Dict) Get(k Value) (Value, bool) {
	if k.kind == KindString {
		if i := d.findStr(k.s); i >= 0 {
			return d.vals[i], true
		}
		return Value{}, false
	}
	hk, ok := hashKey(k, 0)
	if !ok {
		return Value{}, false
	}
	if i := d.find(hk); i >= 0 {
		return d.vals[i], true
	}
	return Value{}, false
}

// GetStr returns the value of the string key k.
func (d *Dict) GetStr(k string) (Value, bool) {
	if i := d.findStr(k); i >= 0 {
		return d.vals[i], true
	}
	return Value{}, false
}

// Set sets key k to v (a new key goes last; an existing one keeps its
// place). It reports false for a key Python cannot hash.
func (d *Dict) Set(k, v Value) bool {
	hk, ok := hashKey(k, 0)
	if !ok {
		return false
	}
	if i := d.find(hk); i >= 0 {
		d.vals[i] = v
		return true
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	if d.idx != nil {
		d.idx[hk] = len(d.keys) - 1
	} else if len(d.keys) > dictIndexMin {
		d.idx = make(map[hkey]int, len(d.keys)*2)
		for i, key := range d.keys {
			h, _ := hashKey(key, 0)
			if _, dup := d.idx[h]; !dup {
				d.idx[h] = i
			}
		}
	}
	return true
}

// SetStr sets the string key k to v.
func (d *Dict) SetStr(k string, v Value) { d.Set(Str(k), v) }

// Keys returns the keys in order (not copied).
func (d *Dict) Keys() []Value { return d.keys }

// Values returns the values in key order (not copied).
func (d *Dict) Values() []Value { return d.vals }

func (d *Dict) copy() *Dict {
	c := &Dict{keys: append([]Value(nil), d.keys...), vals: append([]Value(nil), d.vals...)}
	if d.idx != nil {
		c.idx = make(map[hkey]int, len(d.idx))
		for k, i := range d.idx {
			c.idx[k] = i
		}
	}
	return c
}
