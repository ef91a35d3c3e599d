package savepoint_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/statetable"
)

// groupsOf returns, for Write, the entries of each key group of f, each
// read when asked for, and records the order of the key groups asked.
func groupsOf(f *savepoint.File, asked *[]int) func(g int) iter.Seq2[savepoint.Entry, error] {
	return func(g int) iter.Seq2[savepoint.Entry, error] {
		*asked = append(*asked, g)
		kgs := statetable.KeyGroupRange{First: g, Last: g}
		return f.Entries(context.Background(), savepoint.Select{KeyGroups: &kgs})
	}
}

// Write, given a file's entries one key group at a time, writes the file
// back byte for byte, asking for each key group once, in order.
func TestWriteByKeyGroupIsTheSavepoint(t *testing.T) {
	ctx := context.Background()
	file := testSavepoint(t)
	f := open(t, file)
	var asked []int
	var buf bytes.Buffer
	check(t, savepoint.Write(ctx, &buf, f.Header(), groupsOf(f, &asked), f.Timers(ctx, savepoint.Select{})))
	if !bytes.Equal(buf.Bytes(), file) {
		t.Errorf("Write of the savepoint's key groups: %d bytes, differ from its %d", buf.Len(), len(file))
	}
	if len(asked) != 128 {
		t.Fatalf("%d key groups asked for, want 128", len(asked))
	}
	for i, g := range asked {
		if g != i {
			t.Fatalf("key group %d asked for at %d", g, i)
		}
	}
}

// Write refuses an entry given for another key group, a state or timer
// service the header lacks, and passes a sequence's error on.
func TestWriteRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	f := open(t, testSavepoint(t))
	entries := collect(t, f.Entries(ctx, savepoint.Select{States: []string{"count"}}))
	wrongGroup := func(g int) iter.Seq2[savepoint.Entry, error] {
		return func(yield func(savepoint.Entry, error) bool) {
			for _, e := range entries {
				if e.KeyGroup != g {
					yield(e, nil)
					return
				}
			}
		}
	}
	err := savepoint.Write(ctx, new(bytes.Buffer), f.Header(), wrongGroup, nil)
	if !errors.Is(err, statetable.ErrKeyGroupNotOwned) || !strings.Contains(err.Error(), `"count"`) {
		t.Errorf("an entry of another key group: %v", err)
	}

	unknown := func(g int) iter.Seq2[savepoint.Entry, error] {
		return func(yield func(savepoint.Entry, error) bool) {
			e := entries[0]
			if e.KeyGroup == g {
				e.State = "nope"
				yield(e, nil)
			}
		}
	}
	if err := savepoint.Write(ctx, new(bytes.Buffer), f.Header(), unknown, nil); !errors.Is(err, statetable.ErrUnknownState) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("an entry of a state the header lacks: %v", err)
	}
	badTimer := func(yield func(savepoint.Timer, error) bool) {
		yield(savepoint.Timer{Service: "nope", Key: []byte("k")}, nil)
	}
	if err := savepoint.Write(ctx, new(bytes.Buffer), f.Header(), nil, badTimer); !errors.Is(err, statetable.ErrUnknownState) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a timer of a service the header lacks: %v", err)
	}

	boom := errors.New("boom")
	failing := func(g int) iter.Seq2[savepoint.Entry, error] {
		return func(yield func(savepoint.Entry, error) bool) { yield(savepoint.Entry{}, boom) }
	}
	if err := savepoint.Write(ctx, new(bytes.Buffer), f.Header(), failing, nil); !errors.Is(err, boom) || !strings.Contains(err.Error(), "key group 0") {
		t.Errorf("a sequence's error: %v", err)
	}
}
