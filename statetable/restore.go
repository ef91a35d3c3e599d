package statetable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/cow"
)

// RestoreRun restores a run of n entries of the named state as a snapshot
// section holds them at the start of b: per entry a key blob (the
// composite key, see KeyGroupEntries) and a cell blob, a blob being a
// uvarint length and that many bytes. It returns how many bytes of b the n
// entries took. The run is decoded, checked and stored in one pass: each
// entry is written straight into an array that becomes the leaves of the
// state's map (cow.Map.SetRun), in canonical order (any other order is
// sorted first). Keys are checked against the key groups the table owns
// (else ErrKeyGroupNotOwned); bad bytes, a blob past the end of b
// included, are an error wrapping ErrDecode, and then nothing of the run
// is stored. The table keeps long keys (over 31 bytes) as strings over b,
// so b must never be modified afterwards (a snapshot reader's section
// buffers qualify); shorter keys are copied into the entries. Cost
// O(n + the entries' bytes), one allocation per key length class of the
// run. Writer goroutine only.
//
// The entries are in the state's own encoding: with expiration timestamps
// if the state has a TTL (see RestoreRunFrom). A state with a TTL drops
// what has expired at the table's time.
func (t *Table) RestoreRun(name string, n int, b []byte) (int, error) {
	r, ok := t.states[name]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	return t.RestoreRunFrom(name, r.info().TTL, n, b)
}

// RestoreRunFrom is RestoreRun of entries written by a state that had a
// TTL (ttl: values, list elements and map values carry their expiration
// timestamps) or not. Into a state with a TTL, entries without timestamps
// are stamped to expire the TTL after the table's time, as if written
// now; entries with timestamps keep them, and what has expired is
// dropped. Entries with timestamps into a state without a TTL are an
// error matching ErrStateMismatch. Writer goroutine only.
func (t *Table) RestoreRunFrom(name string, ttl bool, n int, b []byte) (int, error) {
	t.entryWrites++
	r, ok := t.states[name]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	if ttl && !r.info().TTL {
		return 0, fmt.Errorf("%w: state %q has no TTL, its restored entries carry expiration timestamps", ErrStateMismatch, name)
	}
	if n < 0 || n > len(b)/2 { // an entry takes at least two bytes
		return 0, fmt.Errorf("%w: state %q: %d entries cannot fit in %d bytes", ErrDecode, name, n, len(b))
	}
	return r.restoreRun(ttl, n, b)
}

// emptyNamespaceHash is the low bits EntryHash takes from an empty
// namespace encoding (VoidNamespace's), so a restore hashes only the key.
var emptyNamespaceHash = xxhash.Sum64(nil) & (1<<(64-keyHashBits) - 1)

// blobAt returns the bounds of the blob starting at b[off] (off <= len(b)):
// ok is false if its length is not a uvarint or runs past the end of b.
func blobAt(b []byte, off int) (start, end int, ok bool) {
	if start, end, ok = shortBlobAt(b, off); ok {
		return start, end, true
	}
	l, k := binary.Uvarint(b[off:])
	if k <= 0 || l > uint64(len(b)-off-k) {
		return 0, 0, false
	}
	return off + k, off + k + int(l), true
}

// shortBlobAt is blobAt of a blob whose length is below 128 (one byte),
// the common case, small enough to inline into restoreRun's loop; ok is
// false for any other (blobAt tells a longer one from a bad one).
func shortBlobAt(b []byte, off int) (start, end int, ok bool) {
	if off >= len(b) || b[off] >= 0x80 {
		return 0, 0, false
	}
	end = off + 1 + int(b[off])
	return off + 1, end, end <= len(b)
}

// loadKey15 sets *k to the inline key whose length byte is p[0] (at most
// key15Max) followed by the key's bytes: a key blob of a snapshot section
// is exactly that layout. p must hold at least 16 bytes; the bytes past the
// key are zeroed, as makeKey leaves them. Two word loads and masks instead
// of makeKey's variable-length copy.
func loadKey15(k *key15, p []byte) {
	lo := binary.LittleEndian.Uint64(p[:8])
	hi := binary.LittleEndian.Uint64(p[8:16])
	switch n := uint(p[0]) + 1; { // bytes to keep, the length byte included
	case n < 8:
		lo &= 1<<(8*n) - 1
		hi = 0
	default: // a shift by 64 is 0 in Go: n == 16 keeps every byte
		hi &= 1<<(8*(n-8)) - 1
	}
	kb := (*[16]byte)(unsafe.Pointer(k))
	binary.LittleEndian.PutUint64(kb[:8], lo)
	binary.LittleEndian.PutUint64(kb[8:], hi)
}

// restoreRun implements Table.RestoreRun (n is at most len(b)/2).
func (c *cells[K, N, C]) restoreRun(stamped bool, n int, b []byte) (int, error) {
	run := cellRun[C]{n: n}
	r15 := &run.r15
	// A fixed-width cell is decoded inline (fixedInt.decode); one of
	// another length goes to dec, which reports the error. A TTL state's
	// decoder sees every cell.
	maxPar, owned, dec, fixed := c.t.maxPar, c.t.owned, c.cell.dec, c.cell.fixed
	if c.ttl != nil {
		dec, fixed = c.ttlDecoder(stamped), fixedInt{}
		c.ttl.taint() // restored timestamps may be older than the cleanup's floor
	}
	// A key is in an owned key group exactly when its hash is in
	// [lo, hi) (hi 0: up to 2^64), two compares instead of KeyGroupOf's
	// multiply.
	lo, _ := KeyGroupStart(owned.First, maxPar)
	hi, hiOK := KeyGroupStart(owned.Last+1, maxPar)
	if owned.Empty() {
		lo, hi, hiOK = 1, 0, true // no hash is in range
	}
	// pk and pc are the key and cell blob lengths of the entry before when
	// both took one length byte, pkl its composite key's key length when
	// that took one (else -1). An entry laid out as the one before (with
	// fixed-width codecs, every one is) has its bounds computed from off
	// and these, not from the length bytes it loads, which are only
	// compared: the next entry's loads then need not wait for this one's,
	// and the CPU runs ahead over many entries (BenchmarkRestoreRun).
	pk, pc, pkl := -1, -1, -1
	off := 0
	for i := 0; i < n; i++ {
		var ks, ke, cs, ce int
		if off+pk+pc+2 <= len(b) && int(b[off]) == pk && int(b[off+1+pk]) == pc {
			ks = off + 1
			ke = ks + pk
			cs = ke + 1
			ce = cs + pc
		} else {
			var ok bool
			if ks, ke, ok = shortBlobAt(b, off); !ok {
				if ks, ke, ok = blobAt(b, off); !ok {
					return 0, c.runError(i, n, off, "key blob runs past the end of the section")
				}
			}
			if cs, ce, ok = shortBlobAt(b, ke); !ok {
				if cs, ce, ok = blobAt(b, ke); !ok {
					return 0, c.runError(i, n, ke, "cell blob runs past the end of the section")
				}
			}
			pk, pc = -1, -1
			if ks == off+1 && cs == ke+1 {
				pk, pc = ke-ks, ce-cs
			}
		}
		if ke == ks { // a composite key holds at least its key length
			return 0, c.runError(i, n, off, "empty composite key")
		}
		ck := unsafe.String(&b[ks], ke-ks)
		// The composite key: uvarint key length, key bytes, namespace bytes.
		kl, kn := uint64(pkl), 1
		if int(ck[0]) != pkl {
			if kl = uint64(ck[0]); kl >= 0x80 {
				kl, kn = binary.Uvarint(readOnlyBytes(ck))
			}
			pkl = -1
			if kn == 1 {
				pkl = int(kl)
			}
		}
		if kn <= 0 || kl > uint64(len(ck)-kn) {
			return 0, c.runError(i, n, off, "bad key length prefix in the composite key")
		}
		nsStart := ks + kn + int(kl)
		kb := b[ks+kn : nsStart]
		if err := c.keyCheck.check(kb, b[nsStart:ke]); err != nil {
			return 0, c.runError(i, n, off, err.Error())
		}
		var keyHash uint64
		if len(kb) == 8 {
			keyHash = cow.HashUint64(binary.LittleEndian.Uint64(kb)) // HashKey's, inline
		} else {
			keyHash = HashKey(kb)
		}
		if keyHash < lo || hiOK && keyHash >= hi {
			g := KeyGroupOf(keyHash, maxPar)
			return 0, fmt.Errorf("%w: state %q: restored key in key group %d, table owns %v", ErrKeyGroupNotOwned, c.info.Name, g, owned)
		}
		h := keyHash&^(1<<(64-keyHashBits)-1) | emptyNamespaceHash
		if nsStart < ke {
			h = EntryHash(keyHash, b[nsStart:ke])
		}
		var cell C
		if fixed.w != 0 && ce-cs == fixed.w {
			fixed.decode(b[cs:ce], unsafe.Pointer(&cell))
		} else {
			var err error
			if cell, err = dec(b[cs:ce]); err != nil {
				if err == errExpired {
					off = ce
					continue
				}
				return 0, fmt.Errorf("state %q: cell of %d bytes: %w", c.info.Name, ce-cs, err)
			}
		}
		start := off
		off = ce
		// The entries restoreAlike takes have this one's key length and
		// no namespace, which the check above passed.
		alike := fixed.w != 0 && pc == fixed.w && pk <= key15Max && pkl == pk-1 && c.keyCheck.widthOnly()
		switch {
		case isKey8(ck):
			run.r8.next(run.room(), keyHash, ck, noKeyRef).Val = cell // keyHash is key8Hash
			if alike {
				i, off = restoreAlike(&run, &run.r8, i, n, off, b, pk, pc, lo, hi, hiOK, fixed)
			}
		case len(ck) <= key15Max:
			// run.add written out: the common case, and calls of it and
			// of r15.next did not inline.
			room, l := run.room(), len(r15.run)
			switch {
			case l == 0 && r15.run == nil:
				r15.run = make([]cow.MapEntry[key15, C], 0, room)
			case l > 0:
				if last := &r15.run[l-1]; h < last.Hash || h == last.Hash && ck <= keyStr(&last.Key) {
					r15.unsorted = true
				}
			}
			if l < cap(r15.run) {
				r15.run = r15.run[:l+1]
			} else {
				r15.run = append(r15.run, cow.MapEntry[key15, C]{})
			}
			e := &r15.run[l]
			e.Hash = h
			if ks == start+1 && ks+key15Max <= len(b) { // b[start] is the length, 15 bytes follow
				loadKey15(&e.Key, b[start:ks+key15Max])
			} else {
				e.Key = makeKey[key15](ck)
			}
			e.Val = cell
			if alike {
				i, off = restoreAlike(&run, r15, i, n, off, b, pk, pc, lo, hi, hiOK, fixed)
			}
		default:
			run.add(h, ck, cell)
		}
	}
	c.m.storeRun(&run)
	return off, nil
}

// restoreAlike stores in r, the run of run's key class that entry i went
// to, after entry i of a run of n, those of the entries
// at b[off:] that are laid out as entry i was (the common case: a key
// blob of pk bytes holding a key of pk-1 bytes and no namespace, a cell
// blob of pc bytes of a fixed-width cell, in ascending hash order), and
// returns the last one stored and the offset after it. It stops, having
// stored nothing of it, at the first entry that differs in any way or
// whose key is not in [lo, hi): restoreRun's general path takes that one
// and reports what is wrong with it. One call per run, not per entry: the
// loop checks only what may differ, with the entry's bounds fixed, which
// is a third fewer instructions an entry than the general path
// (BenchmarkRestore).
func restoreAlike[K cow.NoKey | key15, C any](run *cellRun[C], r *runOf[K, C], i, n, off int, b []byte, pk, pc int, lo, hi uint64, hiOK bool, fixed fixedInt) (int, int) {
	kl := pk - 1
	_, key8 := any(r).(*runOf[cow.NoKey, C]) // held by key hash (key8Hash)
	stride := 2 + pk + pc
	last := r.run[len(r.run)-1].Hash
	for i+1 < n && off+max(stride, 1+key15Max) <= len(b) && int(b[off]) == pk && int(b[off+1]) == kl && int(b[off+1+pk]) == pc {
		kb := b[off+2 : off+1+pk]
		var keyHash uint64
		if kl == 8 {
			keyHash = cow.HashUint64(binary.LittleEndian.Uint64(kb))
		} else {
			keyHash = HashKey(kb)
		}
		h := keyHash&^(1<<(64-keyHashBits)-1) | emptyNamespaceHash
		if key8 {
			h = keyHash
		}
		l := len(r.run)
		if keyHash < lo || hiOK && keyHash >= hi || h <= last || l == cap(r.run) {
			break
		}
		r.run = r.run[:l+1]
		e := &r.run[l]
		e.Hash = h
		if k, ok := any(&e.Key).(*key15); ok {
			loadKey15(k, b[off:off+1+key15Max])
		}
		fixed.decode(b[off+2+pk:off+stride], unsafe.Pointer(&e.Val))
		last = h
		run.added++
		i++
		off += stride
	}
	return i, off
}

// runError is the error of entry i of a run of n whose bytes are bad at
// byte off of the run.
func (c *cells[K, N, C]) runError(i, n, off int, what string) error {
	return fmt.Errorf("%w: state %q: entry %d of %d, at byte %d of the run: %s", ErrDecode, c.info.Name, i, n, off, what)
}

// errExpired is what a TTL state's restore decoder returns for a cell
// with nothing left that has not expired: the entry is dropped.
var errExpired = errors.New("statetable: expired")

// ttlDecoder returns the cell decoder of a TTL state's restore: of cells
// with timestamps (stamped), dropping what has expired at the table's
// time, or of cells without, stamped to expire the TTL after it.
func (c *cells[K, N, C]) ttlDecoder(stamped bool) func([]byte) (C, error) {
	now := c.t.now()
	if !stamped {
		exp := c.ttl.rt.expiry(now)
		return func(b []byte) (C, error) { return c.ttl.decPlain(b, exp) }
	}
	if c.t.expiryHeld {
		return c.cell.dec
	}
	return func(b []byte) (C, error) {
		cell, err := c.cell.dec(b)
		if err != nil || !c.ttl.expired(cell, now) {
			return cell, err
		}
		if cell, live := c.ttl.prune(cell, now); live {
			return cell, nil
		}
		return cell, errExpired
	}
}

// SkipRun returns how many bytes of b a run of n entries of the named
// state takes (see RestoreRun), restoring none: the restore of a state the
// job dropped. Blobs that run past the end of b are an error wrapping
// ErrDecode.
func SkipRun(name string, n int, b []byte) (int, error) {
	if n < 0 || n > len(b)/2 { // an entry takes at least two bytes
		return 0, fmt.Errorf("%w: state %q: %d entries cannot fit in %d bytes", ErrDecode, name, n, len(b))
	}
	off := 0
	for i := range n {
		for range 2 { // the key blob, then the cell blob
			_, end, ok := blobAt(b, off)
			if !ok {
				return 0, fmt.Errorf("%w: state %q: entry %d of %d, at byte %d of the run: a blob runs past the end of the section", ErrDecode, name, i, n, off)
			}
			off = end
		}
	}
	return off, nil
}
