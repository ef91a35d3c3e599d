package layout

import (
	"reflect"
	"testing"
)

func TestLayout(t *testing.T) {
	type padded struct {
		a uint8
		b uint64
	}
	type inline struct {
		n uint8
		b [15]byte
	}
	for _, c := range []struct {
		v                  any
		pointerFree, whole bool
	}{
		{int64(0), true, true},
		{inline{}, true, true},
		{[2]float64{}, true, true},
		{padded{}, true, false},
		{[3]padded{}, true, false},
		{"", false, true},
		{[]byte(nil), false, true},
		{struct{ p *int }{}, false, true},
		{[0]*int{}, true, true},
		{struct {
			k int64
			s string
		}{}, false, true},
	} {
		typ := reflect.TypeOf(c.v)
		if got := PointerFree(typ); got != c.pointerFree {
			t.Errorf("PointerFree(%v) = %v", typ, got)
		}
		if got := Unpadded(typ); got != c.whole {
			t.Errorf("Unpadded(%v) = %v", typ, got)
		}
	}
}
