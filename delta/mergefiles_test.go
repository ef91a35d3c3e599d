package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/internal/fileformat"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

var mergeTestMeta = snapshot.Meta{MaxParallelism: 8, KeyGroups: statetable.KeyGroupRange{First: 0, Last: 7},
	States: []statetable.StateInfo{
		{Name: "a", Kind: statetable.KindValue, Codec: []string{"k", "n", "v"}},
		{Name: "b", Kind: statetable.KindMap, Codec: []string{"k", "n", "v"}},
	},
	Timers: []snapshot.TimerServiceInfo{{Name: "t1", Codecs: [2]string{"k", "n"}}, {Name: "t2", Codecs: [2]string{"k", "n"}}},
}

// drawOp draws an entry op: a put, a delete, a patch or a put with parts.
func drawOp(rt *rapid.T) *entryOp {
	op := &entryOp{}
	switch rapid.IntRange(0, 3).Draw(rt, "op") {
	case 0:
		op.put, op.cell = true, []byte(rapid.StringN(0, 4, 4).Draw(rt, "cell"))
	case 1:
		op.deleted = true
	case 3:
		op.put, op.cell = true, []byte(rapid.StringN(0, 4, 4).Draw(rt, "cell"))
		fallthrough
	case 2:
		op.parts = map[string]statetable.Part{}
		for range rapid.IntRange(0, 3).Draw(rt, "parts") {
			k := rapid.SampledFrom([]string{"", "p", "q", "pq"}).Draw(rt, "part")
			p := statetable.Part{Key: []byte(k), Deleted: rapid.Bool().Draw(rt, "part deleted")}
			if !p.Deleted {
				p.Value = []byte(rapid.StringN(0, 3, 3).Draw(rt, "part value"))
			}
			op.parts[k] = p
		}
	}
	return op
}

// drawDelta draws a delta of mergeTestMeta from base to base+1 of
// between lo and hi entry changes, each of a key group up to lastGroup
// and of one of keys.
func drawDelta(rt *rapid.T, base uint64, lo, hi, lastGroup int, keys []string) *Delta {
	d := &Delta{Base: base, Target: base + 1, Meta: mergeTestMeta}
	for range rapid.IntRange(lo, hi).Draw(rt, "entries") {
		g := rapid.IntRange(0, lastGroup).Draw(rt, "group")
		state := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "state")
		ck := rapid.SampledFrom(keys).Draw(rt, "key")
		d.group(g).ops(state)[ck] = drawOp(rt)
	}
	return d
}

// writeScrambled encodes d as a delta file whose state records list their
// entries in random order, some split in two records, and some keys
// written twice, a decoy first (a reader keeps the later), with entries
// encoded as Write never encodes them (appendScrambled): valid files that
// Write never makes, as WriteDiff's are in hash order.
func writeScrambled(t *testing.T, d *Delta, rng *rand.Rand) []byte {
	ix := indexesOf(d)
	var buf bytes.Buffer
	err := writeSections(context.Background(), &buf, d, d.Groups(), func(g int) ([]byte, int, error) {
		gr := d.groups[g]
		var sec []byte
		for state, ops := range gr.states {
			keys := sortedKeys(ops)
			var entries []keyedOp
			for _, i := range rng.Perm(len(keys)) {
				if rng.IntN(4) == 0 { // a decoy anywhere before the key's op
					at := rng.IntN(len(entries) + 1)
					entries = slices.Insert(entries, at, keyedOp{keys[i], entryOp{put: true, cell: []byte("decoy")}})
				}
				entries = append(entries, keyedOp{keys[i], *ops[keys[i]]})
			}
			cut := rng.IntN(len(entries) + 1)
			for _, run := range [][]keyedOp{entries[:cut], entries[cut:]} {
				sec = append(sec, tagState)
				sec = binary.AppendUvarint(sec, uint64(ix.states[state]))
				sec = binary.AppendUvarint(sec, uint64(len(run)))
				for _, e := range run {
					sec = appendScrambled(sec, rng, &e)
				}
			}
		}
		// The timers as Write writes them: a section of no states.
		timers, _, err := encodeSection(nil, gr.timers, ix)
		return append(sec, timers...), 0, err
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// appendScrambled encodes e as a reader reads it, but at random not as
// Write would: lengths in varints longer than needed, parts in any order
// with a decoy of a part before it, a part's flag other than 0 and 1 (not
// deleted), a put with an empty list of parts.
func appendScrambled(dst []byte, rng *rand.Rand, e *keyedOp) []byte {
	length := func(dst []byte, b []byte) []byte {
		if len(b) < 128 && rng.IntN(4) == 0 {
			dst = append(dst, 0x80|byte(len(b)), 0x80, 0) // three bytes where one does
			return append(dst, b...)
		}
		return fileformat.AppendBytes(dst, b)
	}
	kind := e.op.kind()
	if kind == opPut && rng.IntN(4) == 0 {
		kind = opPutPatch
	}
	dst = length(append(dst, kind), []byte(e.ck))
	if kind == opPut || kind == opPutPatch {
		dst = length(dst, e.op.cell)
	}
	if kind != opPatch && kind != opPutPatch {
		return dst
	}
	var parts []statetable.Part
	for _, i := range rng.Perm(len(e.op.parts)) {
		p := e.op.partList()[i]
		if rng.IntN(4) == 0 {
			parts = append(parts, statetable.Part{Key: p.Key, Value: []byte("decoy")})
		}
		parts = append(parts, p)
	}
	dst = binary.AppendUvarint(dst, uint64(len(parts)))
	for _, p := range parts {
		switch {
		case p.Deleted:
			dst = length(append(dst, 1), p.Key)
		default:
			dst = length(append(dst, byte(rng.IntN(2)*2)), p.Key) // 0 or 2: not deleted
			dst = length(dst, p.Value)
		}
	}
	return dst
}

func openTest(t *testing.T, file []byte) *Reader {
	r, err := Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMergeFiles_AsMerge is MergeFiles' specification: for chains of
// delta files, canonical (Write) or scrambled (entries in any order, keys
// repeated), it writes exactly the bytes of Write(Merge(Read of each)),
// and fails where Merge fails (a patch after a delete: ErrWrongBase).
func TestMergeFiles_AsMerge(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1))
		var files [][]byte
		for i := range rapid.IntRange(1, 5).Draw(rt, "chain") {
			d := drawDelta(rt, uint64(i+1), 0, 25, 7, []string{"", "k1", "k2", "k10", "x", "\xff"})
			for range rapid.IntRange(0, 4).Draw(rt, "timers") {
				g := rapid.IntRange(0, 7).Draw(rt, "timer group")
				tk := timerKey{service: rapid.SampledFrom([]string{"t1", "t2"}).Draw(rt, "service"),
					domain: timerqueue.Domain(rapid.IntRange(0, 1).Draw(rt, "domain")),
					ts:     rapid.Int64Range(-2, 2).Draw(rt, "ts"), key: rapid.SampledFrom([]string{"k1", "k2"}).Draw(rt, "timer key")}
				d.group(g).timers[tk] = rapid.Bool().Draw(rt, "present")
			}
			if rapid.Bool().Draw(rt, "scrambled") {
				files = append(files, writeScrambled(t, d, rng))
				continue
			}
			var buf bytes.Buffer
			if err := Write(ctx, &buf, d, nil); err != nil {
				rt.Fatal(err)
			}
			files = append(files, buf.Bytes())
		}

		var ds []*Delta
		var readers []*Reader
		for _, f := range files {
			r := openTest(t, f)
			d, err := r.Read(ctx, r.Meta().KeyGroups)
			if err != nil {
				rt.Fatal(err)
			}
			r = openTest(t, f)
			if rapid.Bool().Draw(rt, "in memory") {
				if r, err = OpenBytes(f); err != nil {
					rt.Fatal(err)
				}
			}
			ds, readers = append(ds, d), append(readers, r)
		}
		var want bytes.Buffer
		merged, wantErr := Merge(ds...)
		if wantErr == nil {
			if err := Write(ctx, &want, merged, nil); err != nil {
				rt.Fatal(err)
			}
		}
		var got bytes.Buffer
		gotErr := MergeFiles(ctx, &got, readers...)
		switch {
		case wantErr != nil:
			if !errors.Is(gotErr, ErrWrongBase) || !errors.Is(wantErr, ErrWrongBase) {
				rt.Fatalf("Merge: %v; MergeFiles: %v", wantErr, gotErr)
			}
		case gotErr != nil:
			rt.Fatalf("MergeFiles: %v; Merge merged", gotErr)
		case !bytes.Equal(got.Bytes(), want.Bytes()):
			rt.Fatalf("MergeFiles wrote %d bytes unlike Write(Merge)'s %d", got.Len(), want.Len())
		}
	})
}

// TestMergeFiles_Refuses: out of order, of other key groups, of mixed
// TTLs, a corrupt section, an empty chain: errors, nothing merged.
func TestMergeFiles_Refuses(t *testing.T) {
	ctx := context.Background()
	file := func(base uint64, meta snapshot.Meta) []byte {
		d := &Delta{Base: base, Target: base + 1, Meta: meta}
		d.group(1).ops("a")["k"] = put("x")
		var buf bytes.Buffer
		if err := Write(ctx, &buf, d, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	other := mergeTestMeta
	other.MaxParallelism = 16
	ttl := mergeTestMeta
	ttl.States = []statetable.StateInfo{{Name: "a", Kind: statetable.KindValue, Codec: []string{"k", "n", "v"}, TTL: true}}
	corrupt := file(2, mergeTestMeta)
	corrupt[openTest(t, corrupt).index[0].Off+1] ^= 0x40 // in the one section
	for _, c := range []struct {
		name  string
		chain [][]byte
		want  error
	}{
		{"out of order", [][]byte{file(2, mergeTestMeta), file(1, mergeTestMeta)}, ErrWrongBase},
		{"a gap", [][]byte{file(1, mergeTestMeta), file(3, mergeTestMeta)}, ErrWrongBase},
		{"other max parallelism", [][]byte{file(1, mergeTestMeta), file(2, other)}, ErrMismatch},
		{"a TTL in one only", [][]byte{file(1, mergeTestMeta), file(2, ttl)}, ErrMismatch},
		{"empty chain", nil, ErrMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rs []*Reader
			for _, f := range c.chain {
				rs = append(rs, openTest(t, f))
			}
			var buf bytes.Buffer
			if err := MergeFiles(ctx, &buf, rs...); !errors.Is(err, c.want) || buf.Len() != 0 {
				t.Fatalf("%v, %d bytes written; want %v", err, buf.Len(), c.want)
			}
		})
	}
	t.Run("corrupt section", func(t *testing.T) {
		var buf bytes.Buffer
		err := MergeFiles(ctx, &buf, openTest(t, file(1, mergeTestMeta)), openTest(t, corrupt))
		if !errors.Is(err, ErrCorrupt) || buf.Len() != 0 || !strings.Contains(err.Error(), "key group 1") {
			t.Fatalf("%v, %d bytes written; want ErrCorrupt naming key group 1", err, buf.Len())
		}
	})
}

// TestMergeFiles_LongRuns: chains whose files hold long runs of keys the
// others do not (where a merge gallops) and keys in common, in one key
// group and one state, merge as Write(Merge) does.
func TestMergeFiles_LongRuns(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		var files [][]byte
		var ds []*Delta
		for i := range rapid.IntRange(2, 4).Draw(rt, "chain") {
			d := &Delta{Base: uint64(i + 1), Target: uint64(i + 2), Meta: mergeTestMeta}
			for range rapid.IntRange(1, 4).Draw(rt, "ranges") {
				from := rapid.IntRange(0, 2000).Draw(rt, "from")
				n := rapid.IntRange(1, 300).Draw(rt, "keys")
				stride := rapid.IntRange(1, 5).Draw(rt, "stride")
				for k := from; k < from+n*stride; k += stride {
					op := &entryOp{put: true, cell: []byte{byte(i)}}
					if k%7 == 0 {
						op = &entryOp{parts: map[string]statetable.Part{"p": {Key: []byte("p"), Value: []byte{byte(i)}}}}
					}
					d.group(3).ops("b")[fmt.Sprintf("key%05d", k)] = op
				}
			}
			var buf bytes.Buffer
			if err := Write(ctx, &buf, d, nil); err != nil {
				rt.Fatal(err)
			}
			files, ds = append(files, buf.Bytes()), append(ds, d)
		}
		merged, err := Merge(ds...)
		if err != nil {
			rt.Fatal(err)
		}
		var want, got bytes.Buffer
		if err := Write(ctx, &want, merged, nil); err != nil {
			rt.Fatal(err)
		}
		var readers []*Reader
		for _, f := range files {
			readers = append(readers, openTest(t, f))
		}
		if err := MergeFiles(ctx, &got, readers...); err != nil {
			rt.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			rt.Fatalf("MergeFiles wrote %d bytes unlike Write(Merge)'s %d", got.Len(), want.Len())
		}
	})
}

// TestMergeFiles_DecodesAsRead: a file whose sections were altered after
// encoding, their checksums made to match (a byte changed, a section cut
// short), merges exactly when Read reads it and Merge merges what Read
// gives: MergeFiles writes Write(Merge(...)) or fails as they fail, and
// never panics. So the merge's own reading of entries accepts and means
// what Read's does.
func TestMergeFiles_DecodesAsRead(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		var files [][]byte
		for i := range rapid.IntRange(1, 3).Draw(rt, "chain") {
			d := drawDelta(rt, uint64(i+1), 1, 12, 3, []string{"", "k1", "k2", "0123456789"})
			ix := indexesOf(d)
			altered := rapid.IntRange(-1, 3).Draw(rt, "altered group") // -1: none
			var buf bytes.Buffer
			err := writeSections(ctx, &buf, d, d.Groups(), func(g int) ([]byte, int, error) {
				sec, n, err := encodeGroup(d.groups[g], ix)
				if g == altered && len(sec) > 0 {
					sec = bytes.Clone(sec)
					at := rapid.IntRange(0, len(sec)-1).Draw(rt, "at")
					if rapid.Bool().Draw(rt, "cut") {
						sec = sec[:max(at, 1)] // an index entry of 0 bytes is refused by Open
					} else {
						sec[at] = byte(rapid.IntRange(0, 255).Draw(rt, "byte"))
					}
				}
				return sec, n, err
			}, nil)
			if err != nil {
				rt.Fatal(err)
			}
			files = append(files, buf.Bytes())
		}
		var ds []*Delta
		var readErr error
		for _, f := range files {
			r := openTest(t, f)
			d, err := r.Read(ctx, r.Meta().KeyGroups)
			if err != nil {
				readErr = err
				break
			}
			ds = append(ds, d)
		}
		var want, got bytes.Buffer
		wantErr := readErr
		if wantErr == nil {
			merged, err := Merge(ds...)
			if wantErr = err; err == nil {
				if err := Write(ctx, &want, merged, nil); err != nil {
					rt.Fatal(err)
				}
			}
		}
		var readers []*Reader
		for _, f := range files {
			r, err := OpenBytes(f)
			if err != nil {
				rt.Fatal(err)
			}
			readers = append(readers, r)
		}
		gotErr := MergeFiles(ctx, &got, readers...)
		switch {
		case wantErr != nil && gotErr == nil:
			rt.Fatalf("Read or Merge: %v; MergeFiles merged", wantErr)
		case wantErr == nil && gotErr != nil:
			rt.Fatalf("MergeFiles: %v; Read and Merge did not fail", gotErr)
		case wantErr != nil:
			if !errors.Is(gotErr, ErrCorrupt) && !errors.Is(gotErr, ErrWrongBase) {
				rt.Fatalf("MergeFiles: %v, want ErrCorrupt or ErrWrongBase", gotErr)
			}
		case !bytes.Equal(got.Bytes(), want.Bytes()):
			rt.Fatalf("MergeFiles wrote %d bytes unlike Write(Merge)'s %d", got.Len(), want.Len())
		}
	})
}
