package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ValueType is the type tag of a GGUF metadata value, numbered as in
// gguf.h (enum gguf_type) and stored with that number in the file.
type ValueType uint32

// The GGUF value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// valueTypeCount is one past the last valid ValueType.
const valueTypeCount = 13

var valueTypeNames = [valueTypeCount]string{
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
}

// valueTypeBytes is the encoded size of each fixed-size type; 0 for string
// and array.
var valueTypeBytes = [valueTypeCount]int{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}

// String returns the short name of t ("u32", "string", ...) or "type(N)"
// for a number that is not a GGUF value type.
func (t ValueType) String() string {
	if t.Valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Valid reports whether t is one of the thirteen GGUF value types.
func (t ValueType) Valid() bool { return t < valueTypeCount }

// fixedSize returns the encoded size of a fixed-size type, or 0 for string,
// array and invalid types.
func (t ValueType) fixedSize() int {
	if t.Valid() {
		return valueTypeBytes[t]
	}
	return 0
}

func (t ValueType) isInteger() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

// Value is one GGUF metadata value: a scalar, a string, or an array whose
// elements all have type ElemType (arrays of arrays are allowed, and each
// inner array has its own element type).
//
// Build values with the constructors (Uint32Value, StringValue,
// ArrayValue, ...) and read them with the accessors, which report false when
// the value does not have a fitting type. The zero Value is the u8 0; a Value
// literal with only Type set is the zero of that type (an empty string or an
// empty array of ElemType). Values are immutable and safe to share; values
// read from a file are copies and stay valid after the File is closed.
type Value struct {
	// Type is the value's type tag.
	Type ValueType
	// ElemType is the element type when Type is TypeArray, else unused.
	ElemType ValueType

	bits uint64 // scalars: zero-extended unsigned, sign-extended signed, IEEE bits of floats, bool byte
	str  string
	arr  *arrayData
}

// arrayData holds an array's elements in one of three forms, chosen by the
// element type: little-endian encoded bytes for fixed-size elements, strings,
// or nested array Values.
type arrayData struct {
	raw   []byte
	strs  []string
	vals  []Value
	depth int // 1 for an array of scalars or strings, 1 + the deepest element otherwise
}

// Uint8Value returns a u8 Value.
func Uint8Value(x uint8) Value { return Value{Type: TypeUint8, bits: uint64(x)} }

// Int8Value returns an i8 Value.
func Int8Value(x int8) Value { return Value{Type: TypeInt8, bits: uint64(int64(x))} }

// Uint16Value returns a u16 Value.
func Uint16Value(x uint16) Value { return Value{Type: TypeUint16, bits: uint64(x)} }

// Int16Value returns an i16 Value.
func Int16Value(x int16) Value { return Value{Type: TypeInt16, bits: uint64(int64(x))} }

// Uint32Value returns a u32 Value.
func Uint32Value(x uint32) Value { return Value{Type: TypeUint32, bits: uint64(x)} }

// Int32Value returns an i32 Value.
func Int32Value(x int32) Value { return Value{Type: TypeInt32, bits: uint64(int64(x))} }

// Uint64Value returns a u64 Value.
func Uint64Value(x uint64) Value { return Value{Type: TypeUint64, bits: x} }

// Int64Value returns an i64 Value.
func Int64Value(x int64) Value { return Value{Type: TypeInt64, bits: uint64(x)} }

// Float32Value returns an f32 Value.
func Float32Value(x float32) Value {
	return Value{Type: TypeFloat32, bits: uint64(math.Float32bits(x))}
}

// Float64Value returns an f64 Value.
func Float64Value(x float64) Value { return Value{Type: TypeFloat64, bits: math.Float64bits(x)} }

// BoolValue returns a bool Value.
func BoolValue(x bool) Value {
	if x {
		return Value{Type: TypeBool, bits: 1}
	}
	return Value{Type: TypeBool}
}

// StringValue returns a string Value.
func StringValue(s string) Value { return Value{Type: TypeString, str: s} }

// StringsValue returns an array of strings. It copies ss.
func StringsValue(ss []string) Value {
	return Value{Type: TypeArray, ElemType: TypeString, arr: &arrayData{strs: slices.Clone(ss), depth: 1}}
}

// Float32sValue returns an array of f32.
func Float32sValue(xs []float32) Value {
	raw := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
	}
	return Value{Type: TypeArray, ElemType: TypeFloat32, arr: &arrayData{raw: raw, depth: 1}}
}

// Int32sValue returns an array of i32.
func Int32sValue(xs []int32) Value {
	raw := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		raw = binary.LittleEndian.AppendUint32(raw, uint32(x))
	}
	return Value{Type: TypeArray, ElemType: TypeInt32, arr: &arrayData{raw: raw, depth: 1}}
}

// Uint32sValue returns an array of u32.
func Uint32sValue(xs []uint32) Value {
	raw := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		raw = binary.LittleEndian.AppendUint32(raw, x)
	}
	return Value{Type: TypeArray, ElemType: TypeUint32, arr: &arrayData{raw: raw, depth: 1}}
}

// ArrayValue returns an array with element type elem holding elems. Every
// element must have type elem; when elem is TypeArray the elements are
// arrays of any element type, nested at most 8 deep in all.
func ArrayValue(elem ValueType, elems ...Value) (Value, error) {
	if !elem.Valid() {
		return Value{}, fmt.Errorf("array value: element type %s is not a GGUF value type", elem)
	}
	a := &arrayData{depth: 1}
	for i, e := range elems {
		if e.Type != elem {
			return Value{}, fmt.Errorf("array value: element %d has type %s, want %s", i, e.Type, elem)
		}
		if err := e.check(); err != nil {
			return Value{}, fmt.Errorf("array value: element %d: %w", i, err)
		}
	}
	switch {
	case elem == TypeString:
		a.strs = make([]string, len(elems))
		for i, e := range elems {
			a.strs[i] = e.str
		}
	case elem == TypeArray:
		a.vals = slices.Clone(elems)
		for _, e := range elems {
			a.depth = max(a.depth, e.depth()+1)
		}
		if a.depth > arrayDepthMax {
			return Value{}, fmt.Errorf("array value: arrays nest %d deep, more than the limit of %d", a.depth, arrayDepthMax)
		}
	default:
		size := elem.fixedSize()
		a.raw = make([]byte, 0, size*len(elems))
		for _, e := range elems {
			a.raw = appendFixed(a.raw, e.bits, size)
		}
	}
	return Value{Type: TypeArray, ElemType: elem, arr: a}, nil
}

// appendFixed appends the low size bytes of bits, little-endian.
func appendFixed(b []byte, bits uint64, size int) []byte {
	for i := range size {
		b = append(b, byte(bits>>(8*i)))
	}
	return b
}

// readFixed decodes a little-endian fixed-size element of type t into the
// Value bit representation (sign-extending signed integers).
func readFixed(b []byte, t ValueType) uint64 {
	var u uint64
	switch len(b) {
	case 1:
		u = uint64(b[0])
	case 2:
		u = uint64(binary.LittleEndian.Uint16(b))
	case 4:
		u = uint64(binary.LittleEndian.Uint32(b))
	case 8:
		u = binary.LittleEndian.Uint64(b)
	}
	if t.isSigned() && len(b) < 8 {
		shift := 64 - 8*uint(len(b))
		u = uint64(int64(u<<shift) >> shift)
	}
	return u
}

func (v Value) depth() int {
	if v.Type != TypeArray {
		return 0
	}
	if v.arr == nil {
		return 1
	}
	return v.arr.depth
}

// Len returns the number of elements of an array, or 0 for other values.
func (v Value) Len() int {
	if v.Type != TypeArray || v.arr == nil {
		return 0
	}
	switch {
	case v.ElemType == TypeString:
		return len(v.arr.strs)
	case v.ElemType == TypeArray:
		return len(v.arr.vals)
	case v.ElemType.fixedSize() > 0:
		return len(v.arr.raw) / v.ElemType.fixedSize()
	}
	return 0
}

// Index returns element i of an array as a Value; ok is false when v is not
// an array or i is out of range.
func (v Value) Index(i int) (Value, bool) {
	if i < 0 || i >= v.Len() {
		return Value{}, false
	}
	switch v.ElemType {
	case TypeString:
		return StringValue(v.arr.strs[i]), true
	case TypeArray:
		return v.arr.vals[i], true
	}
	size := v.ElemType.fixedSize()
	return Value{Type: v.ElemType, bits: readFixed(v.arr.raw[i*size:(i+1)*size], v.ElemType)}, true
}

// String returns the string held by a string Value.
func (v Value) String() (string, bool) {
	if v.Type != TypeString {
		return "", false
	}
	return v.str, true
}

// Bool returns the value of a bool Value; any non-zero byte is true.
func (v Value) Bool() (bool, bool) {
	if v.Type != TypeBool {
		return false, false
	}
	return v.bits != 0, true
}

// Int64 returns the value of an integer Value of any width or signedness
// when it fits in an int64.
func (v Value) Int64() (int64, bool) {
	if !v.Type.isInteger() {
		return 0, false
	}
	if !v.Type.isSigned() && v.bits > math.MaxInt64 {
		return 0, false
	}
	return int64(v.bits), true
}

// Uint64 returns the value of an integer Value of any width or signedness
// when it is not negative.
func (v Value) Uint64() (uint64, bool) {
	if !v.Type.isInteger() {
		return 0, false
	}
	if v.Type.isSigned() && int64(v.bits) < 0 {
		return 0, false
	}
	return v.bits, true
}

// Uint32 returns the value of an integer Value of any type when it fits in
// a uint32 (files written by different tools store the same key as u32, i32
// or u64).
func (v Value) Uint32() (uint32, bool) {
	u, ok := v.Uint64()
	if !ok || u > math.MaxUint32 {
		return 0, false
	}
	return uint32(u), true
}

// Int32 returns the value of an integer Value of any type when it fits in an
// int32.
func (v Value) Int32() (int32, bool) {
	i, ok := v.Int64()
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, false
	}
	return int32(i), true
}

// Int returns the value of an integer Value of any type when it fits in an
// int.
func (v Value) Int() (int, bool) {
	i, ok := v.Int64()
	if !ok || i < math.MinInt || i > math.MaxInt {
		return 0, false
	}
	return int(i), true
}

// Float64 returns the value of an f32 or f64 Value.
func (v Value) Float64() (float64, bool) {
	switch v.Type {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// Float32 returns the value of an f32 Value, or of an f64 Value rounded to
// float32.
func (v Value) Float32() (float32, bool) {
	f, ok := v.Float64()
	return float32(f), ok
}

// Strings returns a copy of the elements of an array of strings.
func (v Value) Strings() ([]string, bool) {
	if v.Type != TypeArray || v.ElemType != TypeString {
		return nil, false
	}
	if v.arr == nil {
		return []string{}, true
	}
	return slices.Clone(v.arr.strs), true
}

// Float32s returns the elements of an array of f32 or f64 as float32s.
func (v Value) Float32s() ([]float32, bool) {
	if v.Type != TypeArray || (v.ElemType != TypeFloat32 && v.ElemType != TypeFloat64) {
		return nil, false
	}
	out := make([]float32, v.Len())
	for i := range out {
		e, _ := v.Index(i)
		out[i], _ = e.Float32()
	}
	return out, true
}

// Int32s returns the elements of an array of any integer type converted to
// int32; ok is false when an element does not fit.
func (v Value) Int32s() ([]int32, bool) {
	if v.Type != TypeArray || !v.ElemType.isInteger() {
		return nil, false
	}
	out := make([]int32, v.Len())
	for i := range out {
		e, _ := v.Index(i)
		x, ok := e.Int32()
		if !ok {
			return nil, false
		}
		out[i] = x
	}
	return out, true
}

// Array returns the elements of an array as Values.
func (v Value) Array() ([]Value, bool) {
	if v.Type != TypeArray {
		return nil, false
	}
	out := make([]Value, v.Len())
	for i := range out {
		out[i], _ = v.Index(i)
	}
	return out, true
}

// Equal reports whether v and w have the same type and contents. Floats
// compare by bit pattern, so a NaN equals the same NaN.
func (v Value) Equal(w Value) bool {
	if v.Type != w.Type {
		return false
	}
	switch v.Type {
	case TypeString:
		return v.str == w.str
	case TypeArray:
		return v.arrayEqual(w)
	}
	return v.bits == w.bits
}

// arrayEqual compares two arrays; recursion is bounded by arrayDepthMax.
func (v Value) arrayEqual(w Value) bool {
	if v.ElemType != w.ElemType || v.Len() != w.Len() {
		return false
	}
	if v.Len() == 0 {
		return true
	}
	switch v.ElemType {
	case TypeString:
		return slices.Equal(v.arr.strs, w.arr.strs)
	case TypeArray:
		return slices.EqualFunc(v.arr.vals, w.arr.vals, Value.Equal)
	}
	return string(v.arr.raw) == string(w.arr.raw)
}

// textElemsMax is how many array elements Text shows.
const textElemsMax = 8

// Text renders v for people: numbers in Go syntax, strings quoted, arrays as
// "[a, b, ...] (N elements)" showing at most the first 8 elements.
func (v Value) Text() string {
	var b strings.Builder
	v.appendText(&b)
	return b.String()
}

func (v Value) appendText(b *strings.Builder) {
	switch {
	case v.Type == TypeString:
		b.WriteString(strconv.Quote(v.str))
	case v.Type == TypeBool:
		b.WriteString(strconv.FormatBool(v.bits != 0))
	case v.Type == TypeFloat32 || v.Type == TypeFloat64:
		f, _ := v.Float64()
		bitSize := 64
		if v.Type == TypeFloat32 {
			bitSize = 32
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, bitSize))
	case v.Type.isSigned():
		b.WriteString(strconv.FormatInt(int64(v.bits), 10))
	case v.Type.isInteger():
		b.WriteString(strconv.FormatUint(v.bits, 10))
	case v.Type == TypeArray:
		v.appendArrayText(b)
	default:
		fmt.Fprintf(b, "<%s>", v.Type)
	}
}

func (v Value) appendArrayText(b *strings.Builder) {
	n := v.Len()
	fmt.Fprintf(b, "%s[", v.ElemType)
	for i := range min(n, textElemsMax) {
		if i > 0 {
			b.WriteString(", ")
		}
		e, _ := v.Index(i)
		e.appendText(b)
	}
	if n > textElemsMax {
		b.WriteString(", ...")
	}
	fmt.Fprintf(b, "] (%d elements)", n)
}

// check reports whether v can be encoded: a valid type and, for arrays,
// elements stored in the form the element type needs. Values built by the
// constructors or read by Parse always pass; a hand-made literal with an
// invalid Type does not.
func (v Value) check() error {
	if !v.Type.Valid() {
		return fmt.Errorf("value type %s is not a GGUF value type", v.Type)
	}
	if v.Type != TypeArray {
		return nil
	}
	if !v.ElemType.Valid() {
		return fmt.Errorf("array element type %s is not a GGUF value type", v.ElemType)
	}
	if v.depth() > arrayDepthMax {
		return fmt.Errorf("arrays nest %d deep, more than the limit of %d", v.depth(), arrayDepthMax)
	}
	return nil
}
