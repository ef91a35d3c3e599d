package delta

import (
	"errors"
	"testing"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

func put(cell string) *entryOp { return &entryOp{put: true, cell: []byte(cell)} }
func del() *entryOp            { return &entryOp{deleted: true} }
func patch(kv ...string) *entryOp {
	op := &entryOp{parts: map[string]statetable.Part{}}
	for i := 0; i < len(kv); i += 2 {
		p := statetable.Part{Key: []byte(kv[i]), Value: []byte(kv[i+1])}
		if kv[i+1] == "" {
			p.Deleted, p.Value = true, nil
		}
		op.parts[kv[i]] = p
	}
	return op
}

func describe(op *entryOp) string {
	s := ""
	switch {
	case op.deleted:
		return "delete"
	case op.put:
		s = "put " + string(op.cell)
	default:
		s = "patch"
	}
	for _, k := range sortedKeys(op.parts) {
		p := op.parts[k]
		if p.Deleted {
			s += " -" + k
		} else {
			s += " " + k + "=" + string(p.Value)
		}
	}
	return s
}

// TestCompose pins down the net effect of two writes of one entry.
func TestCompose(t *testing.T) {
	for _, c := range []struct {
		a, b *entryOp
		want string
	}{
		{nil, put("x"), "put x"},
		{put("x"), put("y"), "put y"},
		{put("x"), del(), "delete"},
		{del(), put("y"), "put y"},
		{put("x"), patch("1", "a"), "put x 1=a"},
		{patch("1", "a", "2", "b"), patch("2", "", "3", "c"), "patch 1=a -2 3=c"},
		{put("x"), patch("1", "a"), "put x 1=a"},
		{patch("1", "a"), del(), "delete"},
	} {
		got, err := compose(c.a, c.b)
		if err != nil {
			t.Fatal(err)
		}
		if d := describe(got); d != c.want {
			t.Errorf("compose: got %q, want %q", d, c.want)
		}
	}
	if _, err := compose(del(), patch("1", "a")); !errors.Is(err, ErrWrongBase) {
		t.Fatalf("patch after delete: %v", err)
	}
}

func TestMerge_Chain(t *testing.T) {
	d1 := &Delta{Base: 1, Target: 2}
	d1.group(3).ops("s")["k"] = put("x")
	d1.group(3).timers[timerKey{service: "t", ts: 5, key: "k"}] = true
	d2 := &Delta{Base: 2, Target: 3}
	d2.group(3).ops("s")["k"] = patch("0", "a")
	d2.group(3).timers[timerKey{service: "t", ts: 5, key: "k"}] = false
	d2.group(4).ops("s")["j"] = del()
	m, err := Merge(d1, d2)
	if err != nil {
		t.Fatal(err)
	}
	if m.Base != 1 || m.Target != 3 {
		t.Fatalf("merged %d->%d", m.Base, m.Target)
	}
	if d := describe(m.groups[3].states["s"]["k"]); d != "put x 0=a" {
		t.Fatalf("merged entry: %s", d)
	}
	if present := m.groups[3].timers[timerKey{service: "t", ts: 5, key: "k"}]; present {
		t.Fatal("timer added then removed is present")
	}
	if entries, timers := m.Changes(); entries != 2 || timers != 1 {
		t.Fatalf("changes %d %d", entries, timers)
	}
	// The inputs are untouched.
	if d := describe(d1.groups[3].states["s"]["k"]); d != "put x" {
		t.Fatalf("input changed: %s", d)
	}
	if _, err := Merge(d2, d1); !errors.Is(err, ErrWrongBase) {
		t.Fatalf("out of order: %v", err)
	}
}

// TestMerge_TTLMismatch refuses to merge deltas in which a state has a TTL
// in one and not in the other (cells encoded with and without timestamps).
func TestMerge_TTLMismatch(t *testing.T) {
	meta := func(ttl bool) snapshot.Meta {
		return snapshot.Meta{MaxParallelism: 4, KeyGroups: statetable.KeyGroupRange{First: 0, Last: 3},
			States: []statetable.StateInfo{{Name: "s", Kind: statetable.KindValue, Codec: []string{"a", "b", "c"}, TTL: ttl}}}
	}
	a := &Delta{Base: 1, Target: 2, Meta: meta(false)}
	b := &Delta{Base: 2, Target: 3, Meta: meta(true)}
	if _, err := Merge(a, b); !errors.Is(err, ErrMismatch) {
		t.Fatalf("merge of a delta without TTL and one with: %v, want ErrMismatch", err)
	}
	c := &Delta{Base: 2, Target: 3, Meta: meta(false)}
	if _, err := Merge(a, c); err != nil {
		t.Fatalf("merge of deltas alike: %v", err)
	}
}

// TestMerge_CodecMismatch refuses to merge deltas in which a state has
// other codecs (values written by two versions of an Evolving codec) or is
// missing from the last: the merged delta is read with the last one's
// metadata.
func TestMerge_CodecMismatch(t *testing.T) {
	meta := func(name, vc string) snapshot.Meta {
		return snapshot.Meta{MaxParallelism: 4, KeyGroups: statetable.KeyGroupRange{First: 0, Last: 3},
			States: []statetable.StateInfo{{Name: name, Kind: statetable.KindValue, Codec: []string{"a", "b", vc}}}}
	}
	a := &Delta{Base: 1, Target: 2, Meta: meta("s", "struct{A int32}")}
	for what, b := range map[string]*Delta{
		"another value codec": {Base: 2, Target: 3, Meta: meta("s", "struct{A int64}")},
		"a renamed state":     {Base: 2, Target: 3, Meta: meta("t", "struct{A int32}")},
	} {
		if _, err := Merge(a, b); !errors.Is(err, ErrMismatch) {
			t.Errorf("merge across %s: %v, want ErrMismatch", what, err)
		}
	}
}
