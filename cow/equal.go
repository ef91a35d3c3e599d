package cow

import (
	"reflect"
	"unsafe"

	"github.com/cowstate/cowstate/internal/layout"
)

// Equal is the equality of comparable values, for NewMap and NewTree. For
// values with no pointers and no padding, passing nil instead gives
// BytesEqual, which a Map with one-word values compares inline.
func Equal[V comparable](a, b V) bool { return a == b }

// BytesEqual reports whether a and b have the same bytes. It is the
// equality NewMap and NewTree use when given a nil equal function, which
// they allow for value types with no pointers and no padding (int64, a
// struct of numbers without gaps): for those, equal bytes and equal values
// are the same thing, except that a float NaN equals itself and -0.0 does
// not equal +0.0. A Map whose values are one aligned word (int64, uint64,
// float64) then compares them inline, with no call through a function
// value, which a put of a present key makes (BenchmarkPut, snap=none).
func BytesEqual[V any](a, b V) bool {
	if oneWord[V]() {
		return wordsEqual(unsafe.Pointer(&a), unsafe.Pointer(&b))
	}
	if twoWords[V]() {
		return wordsEqual(unsafe.Pointer(&a), unsafe.Pointer(&b)) &&
			wordsEqual(unsafe.Add(unsafe.Pointer(&a), 8), unsafe.Add(unsafe.Pointer(&b), 8))
	}
	n := unsafe.Sizeof(a)
	return unsafe.String((*byte)(unsafe.Pointer(&a)), n) == unsafe.String((*byte)(unsafe.Pointer(&b)), n)
}

// oneWord reports whether V is one aligned 8-byte word, which compares as
// one uint64. A constant for each instantiation.
func oneWord[V any]() bool {
	var v V
	return unsafe.Sizeof(v) == 8 && unsafe.Alignof(v) == 8
}

// twoWords reports whether V is two 8-byte words, 8-byte aligned (a pair
// of int64s), which compare as two uint64s rather than as 16 bytes by the
// runtime's compare of memory: about 40 instructions fewer a put of a
// 16-byte value (counted by callgrind on a TTL state's count, whose
// equality the state table gives as a closure of its own). A
// constant for each instantiation.
func twoWords[V any]() bool {
	var v V
	return unsafe.Sizeof(v) == 16 && unsafe.Alignof(v) == 8
}

// wordsEqual compares the words at a and b, values of a oneWord type.
func wordsEqual(a, b unsafe.Pointer) bool { return *(*uint64)(a) == *(*uint64)(b) }

// valueEquality resolves the equal argument of NewMap and NewTree: a nil
// equal means BytesEqual, which reports bytewise true. ok is false if equal
// is nil and V holds pointers or padding, whose bytes do not decide
// equality.
func valueEquality[V any](equal func(a, b V) bool) (_ func(a, b V) bool, bytewise, ok bool) {
	if equal != nil {
		return equal, false, true
	}
	t := reflect.TypeFor[V]()
	if !layout.PointerFree(t) || !layout.Unpadded(t) {
		return nil, false, false
	}
	return BytesEqual[V], true, true
}
