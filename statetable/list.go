package statetable

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	"github.com/cowstate/cowstate/cow"
)

// smallListMax is the longest list kept as a plain immutable slice: most
// list states (window buffers) are short, and a B+tree leaf is a kilobyte.
const smallListMax = 8

// list is the cell of a list state. A short list is an immutable slice,
// replaced whole on every append (at most smallListMax elements are
// copied); a longer one is a persistent B+tree from a sequence number to the
// element: appending is O(log n) and copies O(log n) nodes when a capture is
// live, never the list. Two lists are equal (==) when they are the same
// version.
type list[E any] struct {
	small *[]E // never written after creation
	tree  cow.TreeRoot[uint64, E]
}

// Len returns the number of elements.
func (l list[E]) Len() int {
	if l.small != nil {
		return len(*l.small)
	}
	return l.tree.Len()
}

// All yields the elements in order.
func (l list[E]) All() iter.Seq[E] {
	return func(yield func(E) bool) {
		if l.small != nil {
			for _, e := range *l.small {
				if !yield(e) {
					return
				}
			}
			return
		}
		for _, e := range l.tree.All() {
			if !yield(e) {
				return
			}
		}
	}
}

// ListState holds a list of elements per (key, namespace). An empty list is
// no state: Get of an absent key yields nothing.
type ListState[K, N, E any] struct {
	*cells[K, N, list[E]] // nil for a state with a TTL
	keyed[K, N]
	cursor *cow.Tree[uint64, E]
	ttl    listTTL[K, N, E] // nil for a state without a TTL
}

// listTTL is a list state's TTL side (an interface: a ttlList of E holds a
// ListState of stamped[E], which cannot hold a ttlList of its own type).
type listTTL[K, N, E any] interface {
	prefetcher[K, N]
	add(key K, ns N, es []E, replace bool) error
	get(key K, ns N) (iter.Seq[E], error)
	getAt(snap *Snapshot, key K, ns N) (iter.Seq[E], error)
	len(key K, ns N) (int, error)
	clear(key K, ns N) error
	merge(key K, target N, sources []N) error
	runtime() *ttlRuntime
}

// NewList registers a list state; ec is the elements' codec. Writer
// goroutine only.
func NewList[K, N, E any](t *Table, name string, kc Codec[K], nc Codec[N], ec Codec[E]) (*ListState[K, N, E], error) {
	info := StateInfo{Name: name, Kind: KindList, Codec: []string{kc.ID(), nc.ID(), ec.ID()}}
	return registerAs[*ListState[K, N, E]](t, info, nil, func() registered {
		return newListState(t, info, kc, nc, ec)
	})
}

// NewListWithTTL is NewList for a state whose elements expire each on its
// own, as in Flink: an element's timestamp is set when it is added (see
// TTL, and NewValueWithTTL for the errors). Writer goroutine only.
func NewListWithTTL[K, N, E any](t *Table, name string, kc Codec[K], nc Codec[N], ec Codec[E], ttl TTL) (*ListState[K, N, E], error) {
	info := StateInfo{Name: name, Kind: KindList, Codec: []string{kc.ID(), nc.ID(), ec.ID()}, TTL: true}
	return registerAs[*ListState[K, N, E]](t, info, &ttl, func() registered {
		return newTTLList(t, info, kc, nc, ec, ttl)
	})
}

// newListState returns a list state that no table has registered.
func newListState[K, N, E any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], ec Codec[E]) *ListState[K, N, E] {
	s := &ListState[K, N, E]{
		cells:  newCells[K, N, list[E]](t, info, kc, nc, func(a, b list[E]) bool { return a == b }),
		cursor: cow.NewTree(t.owner, cmp.Compare[uint64], equalityFor[E]()),
	}
	s.keyed = keyed[K, N]{s.cells}
	s.cell = cellCodec[list[E]]{enc: func(dst []byte, l list[E]) []byte {
		dst = binary.AppendUvarint(dst, uint64(l.Len()))
		var eb []byte
		for e := range l.All() {
			eb = ec.Append(eb[:0], e)
			dst = appendBlob(dst, eb)
		}
		return dst
	}, dec: func(src []byte) (list[E], error) {
		es, err := decodeList(src, ec)
		if err != nil {
			return list[E]{}, err
		}
		return s.appendTo(list[E]{}, es), nil
	}}
	s.parts = &cellParts[list[E]]{diff: s.diffParts(ec), apply: s.applyParts(ec), empty: func(l list[E]) bool { return l.Len() == 0 }}
	s.migrate = valueMigration(ec)
	return s
}

// decodeList decodes the elements of a list cell.
func decodeList[E any](src []byte, ec Codec[E]) ([]E, error) {
	n, src, err := readCount(src, 1)
	if err != nil {
		return nil, err
	}
	es := make([]E, 0, n)
	for range n {
		var b []byte
		if b, src, err = readBlob(src); err != nil {
			return nil, err
		}
		e, err := ec.Decode(b)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	if len(src) != 0 || n == 0 {
		return nil, fmt.Errorf("%w: list cell: %d elements, %d bytes left over", ErrDecode, n, len(src))
	}
	return es, nil
}

func (s *ListState[K, N, E]) info() StateInfo { return s.cells.info }
func (s *ListState[K, N, E]) handle() any     { return s }

func (s *ListState[K, N, E]) ttlRuntime() *ttlRuntime {
	if s.ttl == nil {
		return nil
	}
	return s.ttl.runtime()
}

// Add appends e to the list of (key, ns). O(log n): one walk of the
// state's map for a short list (smallListMax elements or fewer), where a
// get and a put took two (BenchmarkListAdd); a longer list's append
// writes its tree, and the cell's store then walks again. Writer
// goroutine only.
func (s *ListState[K, N, E]) Add(key K, ns N, e E) error {
	if s.ttl != nil {
		return s.ttl.add(key, ns, []E{e}, false)
	}
	return s.update(key, ns, func(l list[E], _ bool) list[E] { return s.appendTo(l, []E{e}) })
}

// AddEach is Add of e(i) to the list of keys[i], in namespace ns, for
// each index in turn: the result of the calls of Add one by one, each
// group of keys prefetched first, as ValueState.UpdateEach does (the
// cells, which hold each list's first node; not the nodes), and each key
// located once for its prefetch and its append, except with a TTL. An
// error stops it, the keys before the failing one added, and names the
// index. Writer goroutine only.
func (s *ListState[K, N, E]) AddEach(keys []K, ns N, e func(i int) E) error {
	if s.ttl == nil && s.fixedKey.w == 0 {
		return s.eachLocated(keys, ns, func(i int, h uint64, ck string, err error) error {
			if err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			s.m.update(h, ck, true, func(l list[E], _ bool) list[E] { return s.appendTo(l, []E{e(i)}) })
			return nil
		})
	}
	if s.ttl == nil && s.directEach() {
		s.updateEachDirect(keys, func(i int, l list[E], _ bool) list[E] { return s.appendTo(l, []E{e(i)}) }, nil)
		return nil
	}
	return eachInGroups(s.prefetcher(), keys, ns, func(i int) error {
		if err := s.Add(keys[i], ns, e(i)); err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
		return nil
	})
}

// prefetcher returns what prefetches the state's cells: its TTL side's
// with a TTL, else its own.
func (s *ListState[K, N, E]) prefetcher() prefetcher[K, N] {
	if s.ttl != nil {
		return s.ttl
	}
	return s.cells
}

// AddAll appends every element of es, in order.
func (s *ListState[K, N, E]) AddAll(key K, ns N, es iter.Seq[E]) error {
	if s.ttl != nil {
		return s.ttl.add(key, ns, slices.Collect(es), false)
	}
	l, _, err := s.get(key, ns)
	if err != nil {
		return err
	}
	return s.store(key, ns, s.appendTo(l, slices.Collect(es)))
}

// appendTo returns l with es appended: a new small list while the result
// fits, else through the cursor into l's tree (moving a small list's
// elements into a tree first).
func (s *ListState[K, N, E]) appendTo(l list[E], es []E) list[E] {
	if len(es) == 0 {
		return l
	}
	if l.small != nil || l.tree.Len() == 0 {
		var old []E
		if l.small != nil {
			old = *l.small
		}
		if len(old)+len(es) <= smallListMax {
			n := append(append(make([]E, 0, len(old)+len(es)), old...), es...)
			return list[E]{small: &n}
		}
		es = append(append(make([]E, 0, len(old)+len(es)), old...), es...)
		l = list[E]{}
	}
	s.cursor.SetRoot(l.tree)
	next := uint64(0)
	if last, _, ok := s.cursor.Max(); ok {
		next = last + 1
	}
	for _, e := range es {
		s.cursor.Set(next, e)
		next++
	}
	l = list[E]{tree: s.cursor.Root()}
	s.cursor.SetRoot(cow.TreeRoot[uint64, E]{}) // the cursor never keeps a root alive
	return l
}

// store puts l as the list of (key, ns), clearing the state if it is empty.
func (s *ListState[K, N, E]) store(key K, ns N, l list[E]) error {
	if l.Len() == 0 {
		return s.clear(key, ns)
	}
	return s.put(key, ns, l)
}

// Update replaces the list of (key, ns) with es (an empty es clears it).
func (s *ListState[K, N, E]) Update(key K, ns N, es iter.Seq[E]) error {
	if s.ttl != nil {
		return s.ttl.add(key, ns, slices.Collect(es), true)
	}
	if _, _, err := s.locate(key, ns); err != nil {
		return err
	}
	return s.store(key, ns, s.appendTo(list[E]{}, slices.Collect(es)))
}

// Get yields the elements of the list of (key, ns) in order, as the list
// was when the loop began: the loop holds a capture until it ends, so its
// body may write this list and any other state. With a TTL, expired
// elements are removed by the call, and yielded only if the TTL's
// visibility returns them; with UpdateOnReadAndWrite the call refreshes
// every element (O(length)). Writer goroutine only.
func (s *ListState[K, N, E]) Get(key K, ns N) (iter.Seq[E], error) {
	if s.ttl != nil {
		return s.ttl.get(key, ns)
	}
	if _, _, err := s.get(key, ns); err != nil {
		return nil, err
	}
	return func(yield func(E) bool) {
		pin := s.t.owner.Capture()
		defer pin.Release()
		l, _, _ := s.get(key, ns) // it succeeded above
		for e := range l.All() {
			if !yield(e) {
				return
			}
		}
	}, nil
}

// GetAt is Get on a snapshot; any goroutine while the snapshot is live.
func (s *ListState[K, N, E]) GetAt(snap *Snapshot, key K, ns N) (iter.Seq[E], error) {
	if s.ttl != nil {
		return s.ttl.getAt(snap, key, ns)
	}
	l, _, err := s.getAt(snap, key, ns)
	if err != nil {
		return nil, err
	}
	return l.All(), nil
}

// Len returns the length of the list of (key, ns). O(1); with a TTL, the
// number of elements not expired, O(length), and nothing is cleaned up.
func (s *ListState[K, N, E]) Len(key K, ns N) (int, error) {
	if s.ttl != nil {
		return s.ttl.len(key, ns)
	}
	l, _, err := s.get(key, ns)
	return l.Len(), err
}

// Clear removes the list of (key, ns).
func (s *ListState[K, N, E]) Clear(key K, ns N) error {
	if s.ttl != nil {
		return s.ttl.clear(key, ns)
	}
	return s.clear(key, ns)
}

// MergeNamespaces appends the lists of key in the source namespaces, in the
// order given, to the target's list and clears the sources. Empty sources
// are skipped; a source equal to the target is ignored. With a TTL,
// elements keep their timestamps. Writer goroutine only.
func (s *ListState[K, N, E]) MergeNamespaces(key K, target N, sources ...N) error {
	if s.ttl != nil {
		return s.ttl.merge(key, target, sources)
	}
	acc, _, err := s.get(key, target)
	if err != nil {
		return err
	}
	want := string(s.nc.Append(nil, target))
	for _, src := range sources {
		if string(s.nc.Append(nil, src)) == want {
			continue
		}
		l, ok, err := s.get(key, src)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := s.clear(key, src); err != nil {
			return err
		}
		if acc.Len() == 0 {
			acc = l // the source's entry is gone: the root moves, it is not shared
			continue
		}
		acc = s.appendTo(acc, slices.Collect(l.All()))
	}
	if acc.Len() == 0 {
		return nil
	}
	return s.put(key, target, acc)
}

// diffParts returns the part diff of two list cells: the positions that
// differ, when both lists are trees and the patch stays small; short lists
// (plain slices) are written whole.
func (s *ListState[K, N, E]) diffParts(ec Codec[E]) func(old, new list[E]) ([]Part, bool) {
	return func(old, new list[E]) ([]Part, bool) {
		if old.small != nil || new.small != nil {
			return nil, false
		}
		limit := max(new.Len()/patchMaxShare, 1)
		var parts []Part
		for ch := range s.cursor.DiffRoots(old.tree, new.tree) {
			if len(parts) == limit {
				return nil, false
			}
			p := Part{Key: appendPosition(nil, ch.Key)}
			if ch.Kind == cow.Removed {
				p.Deleted = true
			} else {
				p.Value = ec.Append(nil, ch.New)
			}
			parts = append(parts, p)
		}
		return parts, true
	}
}

// applyParts returns the list old with parts applied; the result must be a
// list of consecutive positions from 0, else the parts were not made for
// old (an error wrapping ErrDecode).
func (s *ListState[K, N, E]) applyParts(ec Codec[E]) func(old list[E], parts []Part) (list[E], error) {
	return func(old list[E], parts []Part) (list[E], error) {
		defer s.cursor.SetRoot(cow.TreeRoot[uint64, E]{}) // the cursor never keeps a root alive
		if old.small != nil {
			s.cursor.SetRoot(cow.TreeRoot[uint64, E]{})
			for i, e := range *old.small {
				s.cursor.Set(uint64(i), e)
			}
		} else {
			s.cursor.SetRoot(old.tree)
		}
		for _, p := range parts {
			pos, n := binary.Uvarint(p.Key)
			if n <= 0 || n != len(p.Key) {
				return list[E]{}, fmt.Errorf("%w: list patch: bad position of %d bytes", ErrDecode, len(p.Key))
			}
			if p.Deleted {
				s.cursor.Delete(pos)
				continue
			}
			e, err := ec.Decode(p.Value)
			if err != nil {
				return list[E]{}, fmt.Errorf("list patch: element %d: %w", pos, err)
			}
			s.cursor.Set(pos, e)
		}
		if n := s.cursor.Len(); n > 0 {
			first, _, _ := s.cursor.Min()
			last, _, _ := s.cursor.Max()
			if first != 0 || last != uint64(n-1) {
				return list[E]{}, fmt.Errorf("%w: list patch leaves positions %d..%d for %d elements", ErrDecode, first, last, n)
			}
		}
		return list[E]{tree: s.cursor.Root()}, nil
	}
}
