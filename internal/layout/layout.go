// Package layout answers two questions about a Go type's memory, for the
// packages that handle values as bytes: whether its values hold pointers,
// and whether every byte of a value belongs to a field.
package layout

import "reflect"

// PointerFree reports whether values of t hold no pointer (no pointer,
// string, slice, map, channel, function or interface anywhere in them):
// the garbage collector does not scan them, and a copy of one keeps
// nothing else alive. Cost O(fields); safe from any goroutine.
func PointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || PointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !PointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// Unpadded reports whether every byte of a value of t belongs to a field:
// with no padding, values built field by field that are equal have equal
// bytes. Cost O(fields); safe from any goroutine.
func Unpadded(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return Unpadded(t.Elem())
	case reflect.Struct:
		var sum uintptr
		for i := range t.NumField() {
			f := t.Field(i).Type
			if !Unpadded(f) {
				return false
			}
			sum += f.Size()
		}
		return sum == t.Size()
	}
	return true
}
