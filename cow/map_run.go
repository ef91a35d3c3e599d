package cow

import (
	"slices"
	"unsafe"
)

// MapEntry is a key, its value and its hash, as SetRun takes them.
type MapEntry[K comparable, V any] struct {
	Hash uint64
	Key  K
	Val  V
}

// SetRun stores a run of entries sorted by hash with distinct keys, as a
// restore reads them: where the run falls into an empty part of the map,
// its subtrees are built bottom up, and their leaves are slices of run's
// array itself (one allocation for the whole run, made by the caller, and
// no per-entry walk from the root). Keys already in the map take the run's
// values. The map takes run over: the caller must not touch it afterwards.
// A run not sorted by hash, or with a repeated key, corrupts the map (the
// invariants build checks). Cost O(len(run) + depth). Writer goroutine
// only.
func (m *Map[K, V]) SetRun(run []MapEntry[K, V]) {
	if len(run) == 0 {
		return
	}
	m.owner.beginWrite()
	ents := mapEntries(run)
	m.reuse.noteRun(ents)
	if m.owner.sketch != nil {
		for i := range ents {
			m.owner.sketch.add(ents[i].hash)
		}
	}
	root, added, fresh := m.setRun(&m.root, m.owner.writable(m.rootEpoch), 0, ents)
	m.len += added
	m.setRoot(root, fresh)
	m.verify("SetRun")
	m.owner.endWrite()
}

// mapEntries reinterprets a run as leaf entries: the two types have the
// same fields in the same order, so the same layout.
func mapEntries[K comparable, V any](run []MapEntry[K, V]) []mapEntry[K, V] {
	return unsafe.Slice((*mapEntry[K, V])(unsafe.Pointer(unsafe.SliceData(run))), len(run))
}

// setRun stores run (sorted, non-empty) below s at depth and returns the new
// slot, the number of entries added and whether a returned leaf is the
// writer's (see set).
func (m *Map[K, V]) setRun(s *mapSlot[K, V], writable bool, depth int, run []mapEntry[K, V]) (_ mapSlot[K, V], added int, fresh bool) {
	switch b := s.branch(); {
	case s.p == nil:
		return build(run, depth, m.owner.epoch, false), len(run), true
	case b != nil:
		b = m.ownBranch(b)
		for i := 0; i < len(run); {
			k := slotAt(run[i].hash, depth)
			j := slotEnd(run, i, k, depth)
			kidWritable := b.owned&(1<<k) != 0 && m.owner.writable(b.epoch)
			kid, n, kidFresh := m.setRun(&b.kids[k], kidWritable, depth+1, run[i:j])
			b.setKid(k, kid, kidFresh, rebuilt)
			b.count += n
			added += n
			i = j
		}
		return branchSlot(b), added, false
	}
	// A leaf: merge it with the run (the run's value wins on equal keys)
	// and rebuild; leaves are small, and this is rare in a restore.
	old := s.ents()
	merged := make([]mapEntry[K, V], 0, len(old)+len(run))
	i, j := 0, 0
	for i < len(old) || j < len(run) {
		switch {
		case j == len(run) || i < len(old) && old[i].hash < run[j].hash:
			merged = append(merged, old[i])
			i++
		case i == len(old) || run[j].hash < old[i].hash:
			merged = append(merged, run[j])
			j++
		default: // equal hashes: the run's keys, then the old keys not in it
			h := run[j].hash
			start := j
			for j < len(run) && run[j].hash == h {
				merged = append(merged, run[j])
				j++
			}
			for ; i < len(old) && old[i].hash == h; i++ {
				if !slices.ContainsFunc(run[start:j], func(e mapEntry[K, V]) bool { return e.key == old[i].key }) {
					merged = append(merged, old[i])
				}
			}
		}
	}
	m.reuse.noteRun(merged)
	return build(merged, depth, m.owner.epoch, false), len(merged) - len(old), true
}
