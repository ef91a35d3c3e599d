package statetable

import "fmt"

// keyCheck checks that the key and namespace of a composite key read from
// a file decode with the state's codecs. Every restore path runs it
// (RestoreRun, ApplyEntries, Restore), so that an enumeration of the
// state's keys (Keys, Pairs, KeysAt, PairsAt) never meets bytes it cannot
// decode, and its sequences have no error to report: a file whose keys
// were written by another codec under the same ID fails its restore with
// ErrDecode instead.
//
// Codecs of this package that accept any bytes of the right length (the
// integers, String, Bytes, VoidNamespace) cost a length compare; any other
// codec has its Decode run once per restored entry.
type keyCheck struct {
	kw, nw int                // fixed widths of the key and namespace encodings; -1: any
	kd, nd func([]byte) error // decoders to run; nil: the width says it all
}

func newKeyCheck[K, N any](kc Codec[K], nc Codec[N]) keyCheck {
	var k keyCheck
	k.kw, k.kd = decodeCheckOf(kc)
	k.nw, k.nd = decodeCheckOf(nc)
	return k
}

// decodeCheckOf returns what decodes with c: bytes of width w (-1: any),
// and if that is not all, the decode that tells.
func decodeCheckOf[T any](c Codec[T]) (w int, decode func([]byte) error) {
	switch any(c).(type) {
	case stringCodec, bytesCodec:
		return -1, nil
	case voidCodec:
		return 0, nil
	}
	if f := fixedOf(c); f.w != 0 {
		return f.w, nil
	}
	return -1, func(b []byte) error { _, err := c.Decode(b); return err }
}

// widthOnly reports whether the check is a compare of lengths: entries
// laid out alike (restoreAlike) then need one check for the run.
func (k *keyCheck) widthOnly() bool { return k.kd == nil && k.nd == nil }

// check returns an error unless key and ns decode.
func (k *keyCheck) check(key, ns []byte) error {
	if k.kw >= 0 && len(key) != k.kw {
		return fmt.Errorf("a key of %d bytes, where its codec encodes %d", len(key), k.kw)
	}
	if k.nw >= 0 && len(ns) != k.nw {
		return fmt.Errorf("a namespace of %d bytes, where its codec encodes %d", len(ns), k.nw)
	}
	if k.kd != nil {
		if err := k.kd(key); err != nil {
			return fmt.Errorf("a key its codec cannot decode: %v", err)
		}
	}
	if k.nd != nil {
		if err := k.nd(ns); err != nil {
			return fmt.Errorf("a namespace its codec cannot decode: %v", err)
		}
	}
	return nil
}
