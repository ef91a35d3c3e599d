package savepoint_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/statetable"
)

// collect drains a sequence of a file, failing the test on its error.
func collect[T any](t *testing.T, seq iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		check(t, err)
		out = append(out, v)
	}
	return out
}

func rewrite(t *testing.T, f *savepoint.File, rw savepoint.Rewrite) []byte {
	t.Helper()
	var buf bytes.Buffer
	check(t, f.Rewrite(context.Background(), &buf, rw))
	return buf.Bytes()
}

// A savepoint is canonical: rewriting it unchanged, bootstrapping one from
// its entries and timers, and bootstrapping one from its JSON dump all
// give it back byte for byte.
func TestRewriteAndBootstrapOfTheSameContentAreByteIdentical(t *testing.T) {
	ctx := context.Background()
	file := testSavepoint(t)
	f := open(t, file)
	if got := rewrite(t, f, savepoint.Rewrite{}); !bytes.Equal(got, file) {
		t.Errorf("an unchanged rewrite: %d bytes differ from the savepoint's %d", len(got), len(file))
	}

	entries := collect(t, f.Entries(ctx, savepoint.Select{}))
	timers := collect(t, f.Timers(ctx, savepoint.Select{}))
	// In reverse: Bootstrap takes entries in any order.
	var buf bytes.Buffer
	check(t, savepoint.Bootstrap(ctx, &buf, f.Header(), func(yield func(savepoint.Entry) bool) {
		for i := len(entries) - 1; i >= 0 && yield(entries[i]); i-- {
		}
	}, func(yield func(savepoint.Timer) bool) {
		for i := len(timers) - 1; i >= 0 && yield(timers[i]); i-- {
		}
	}))
	if !bytes.Equal(buf.Bytes(), file) {
		t.Errorf("a bootstrap of the savepoint's %d entries and %d timers differs from it", len(entries), len(timers))
	}

	var dump, out bytes.Buffer
	check(t, f.Dump(ctx, &dump, savepoint.Select{}))
	check(t, savepoint.BootstrapJSON(ctx, &out, bytes.NewReader(dump.Bytes())))
	if !bytes.Equal(out.Bytes(), file) {
		t.Errorf("a bootstrap of the savepoint's JSON dump differs from it")
	}
}

// Changing the max parallelism rekeys every entry and timer: the result is
// the savepoint a job of the new max parallelism writes of the same
// content, and a job of it restores it.
func TestRewriteChangesMaxParallelism(t *testing.T) {
	f := open(t, testSavepoint(t))
	got := rewrite(t, f, savepoint.Rewrite{MaxParallelism: 32})
	j := newJob(t, 32)
	j.fill(t)
	if want := savepointOf(t, j.b); !bytes.Equal(got, want) {
		t.Fatalf("rewritten to 32 key groups: %d bytes, not the %d a job of 32 writes", len(got), len(want))
	}
	restore(t, newJob(t, 32).b, got)
}

// A rewrite drops, renames, filters and migrates, and the job of the new
// release restores what it wrote.
func TestRewriteDropsRenamesFiltersAndMigrates(t *testing.T) {
	f := open(t, testSavepoint(t))
	oldC := must(statetable.Struct[Profile]())(t)
	newC := must(statetable.Struct[ProfileV2]())(t)
	got := rewrite(t, f, savepoint.Rewrite{
		Drop:   []string{"tags", "t"},
		Rename: map[string]string{"count": "clicks"},
		Migrate: map[string]savepoint.Migration{"profile": {Codec: newC.ID(), Func: func(old []byte) ([]byte, error) {
			p, err := oldC.Decode(old)
			if err != nil {
				return nil, err
			}
			return newC.Append(nil, ProfileV2{Name: strings.ToUpper(p.Name), Age: int64(p.Age), City: "Oslo"}), nil
		}}},
		Keep: func(name string, key, _ []byte) bool { return name == "name" || string(key) >= user(100) },
	})
	listing := must(open(t, got).List(context.Background()))(t)
	var names []string
	for _, s := range listing.States {
		names = append(names, s.Name)
	}
	if len(listing.Timers) != 0 || strings.Join(names, ",") != "clicks,name,profile,seen,total,visits" {
		t.Fatalf("states %v, timers %v", names, listing.Timers)
	}

	b := newBackend(t, 128)
	clicks := must(cowstate.Value[string, int64](b, "clicks"))(t)
	must(cowstate.Value[int64, string](b, "name"))(t)
	profile := must(cowstate.Value[string, ProfileV2](b, "profile"))(t)
	must(cowstate.Map[string, string, int64](b, "seen"))(t)
	must(cowstate.Reducing[string](b, "total", func(a, b int64) int64 { return a + b }))(t)
	must(cowstate.ValueWithTTL[string, int64](b, "visits", cowstate.TTL{Duration: time.Hour}))(t)
	restore(t, b, got)
	for _, i := range []int{0, 99, 100, 299} {
		n, ok := must2(clicks.Lookup(user(i)))(t)
		p, pok := must2(profile.Lookup(user(i)))(t)
		if wantOK := i >= 100; ok != wantOK || pok != wantOK {
			t.Fatalf("%s: clicks %v, profile %v present, want %v", user(i), ok, pok, wantOK)
		}
		if want := (ProfileV2{Name: strings.ToUpper(user(i)), Age: int64(20 + i%50), City: "Oslo"}); ok && (n != int64(i) || p != want) {
			t.Errorf("%s: clicks %d, profile %+v; want %d, %+v", user(i), n, p, i, want)
		}
	}
}

// Bad rewrites and bootstraps are errors naming what, and write nothing
// that restores.
func TestRewriteAndBootstrapRefuseBadInput(t *testing.T) {
	ctx := context.Background()
	f := open(t, testSavepoint(t))
	errFail := errors.New("cannot convert")
	for _, c := range []struct {
		name string
		rw   savepoint.Rewrite
		want error
		says string
	}{
		{"unknown state", savepoint.Rewrite{Drop: []string{"nope"}}, statetable.ErrUnknownState, `"nope"`},
		{"two renamed to one", savepoint.Rewrite{Rename: map[string]string{"count": "x", "total": "x"}}, statetable.ErrConfig, `"x"`},
		{"rename onto a kept state", savepoint.Rewrite{Rename: map[string]string{"count": "total"}}, statetable.ErrConfig, `"total"`},
		{"migration of a dropped state", savepoint.Rewrite{Drop: []string{"count"}, Migrate: map[string]savepoint.Migration{"count": {Codec: "string", Func: func(b []byte) ([]byte, error) { return b, nil }}}}, statetable.ErrConfig, `"count"`},
		{"max parallelism", savepoint.Rewrite{MaxParallelism: statetable.MaxParallelismLimit + 1}, statetable.ErrConfig, "max parallelism"},
		{"failing migration", savepoint.Rewrite{Migrate: map[string]savepoint.Migration{"count": {Codec: "int64/be-signflip", Func: func([]byte) ([]byte, error) { return nil, errFail }}}}, errFail, `"count"`},
		{"migration to bytes its codec does not read", savepoint.Rewrite{Migrate: map[string]savepoint.Migration{"count": {Codec: "int64/be-signflip", Func: func([]byte) ([]byte, error) { return []byte{1}, nil }}}}, statetable.ErrDecode, `"count"`},
	} {
		err := f.Rewrite(ctx, &bytes.Buffer{}, c.rw)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v naming %s", c.name, err, c.want, c.says)
		}
	}

	h := f.Header()
	entry := savepoint.Entry{State: "count", Key: []byte("k"), Value: savepoint.Value{Bytes: make([]byte, 8)}}
	for _, c := range []struct {
		name    string
		entries []savepoint.Entry
		want    error
	}{
		{"unknown state", []savepoint.Entry{{State: "nope", Key: []byte("k")}}, statetable.ErrUnknownState},
		{"twice", []savepoint.Entry{entry, entry}, savepoint.ErrDuplicate},
		{"bad value", []savepoint.Entry{{State: "count", Key: []byte("k"), Value: savepoint.Value{Bytes: []byte{1}}}}, statetable.ErrDecode},
		{"a list for a value state", []savepoint.Entry{{State: "count", Key: []byte("k"), List: []savepoint.Value{{Bytes: make([]byte, 8)}}}}, statetable.ErrDecode},
	} {
		err := savepoint.Bootstrap(ctx, &bytes.Buffer{}, h, func(yield func(savepoint.Entry) bool) {
			for _, e := range c.entries {
				if !yield(e) {
					return
				}
			}
		}, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("bootstrap of %s: %v, want %v", c.name, err, c.want)
		}
	}
	for _, in := range []string{"", "{}\n", `{"max_parallelism":0,"states":[]}`, `{"max_parallelism":8,"states":[]}` + "\n" + `{"state":"x","key":"k"}`} {
		if err := savepoint.BootstrapJSON(ctx, &bytes.Buffer{}, strings.NewReader(in)); err == nil {
			t.Errorf("BootstrapJSON of %q: no error", in)
		}
	}
}

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		check(t, err)
		return v
	}
}

func must2[A, B any](a A, b B, err error) func(*testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		check(t, err)
		return a, b
	}
}
