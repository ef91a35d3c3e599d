package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/statetable"
)

// TestErrConfig_OneSentinel: every invalid setting, whether the backend or
// its state table finds it, matches both cowstate.ErrConfig and
// statetable.ErrConfig.
func TestErrConfig_OneSentinel(t *testing.T) {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, ttlErr := cowstate.NamespacedValueWithTTL(b, "v", statetable.String, statetable.Void, statetable.Int64, 0, cowstate.TTL{Duration: time.Microsecond})
	_, maxParErr := cowstate.New(cowstate.Config{MaxParallelism: statetable.MaxParallelismLimit + 1})
	_, groupsErr := cowstate.New(cowstate.Config{MaxParallelism: 4, KeyGroups: &statetable.KeyGroupRange{First: 2, Last: 4}})
	_, budgetErr := cowstate.New(cowstate.Config{TTLCleanupPerAdvance: -1})
	for name, err := range map[string]error{"TTL": ttlErr, "max parallelism": maxParErr, "key groups": groupsErr, "cleanup budget": budgetErr} {
		if !errors.Is(err, cowstate.ErrConfig) || !errors.Is(err, statetable.ErrConfig) {
			t.Errorf("invalid %s: %v, want an error matching cowstate.ErrConfig and statetable.ErrConfig", name, err)
		}
	}
}

// TestErrReleased_OneSentinel: a write of a released snapshot and a read of
// a released view both match cowstate.ErrReleased and cow.ErrReleased.
func TestErrReleased_OneSentinel(t *testing.T) {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := cowstate.NamespacedValue(b, "v", statetable.String, statetable.Void, statetable.Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Put("k", statetable.VoidNamespace{}, 1); err != nil {
		t.Fatal(err)
	}
	snap := b.Snapshot()
	snap.Release()
	writeErr := cowstate.WriteSnapshot(context.Background(), new(bytes.Buffer), snap, nil)
	readErr := func() (err error) {
		defer func() { err, _ = recover().(error) }()
		v.GetAt(snap.State(), "k", statetable.VoidNamespace{})
		return nil
	}()
	for name, err := range map[string]error{"write": writeErr, "read": readErr} {
		if !errors.Is(err, cowstate.ErrReleased) || !errors.Is(err, cow.ErrReleased) {
			t.Errorf("%s of a released snapshot: %v, want an error matching cowstate.ErrReleased and cow.ErrReleased", name, err)
		}
	}
}
