package statetable

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/cow"
)

// TestTTL_DirectPathAsGeneral is the specification of the TTL's direct
// path (ttlCells.direct8): a value state of int64 keys with no namespace
// on a table that owns every key group reads and writes its key8 map
// directly, and must do exactly what the general path does. Random gets,
// lookups, puts, updates and clears, with the clock moving on, run on two
// such states, one made to take the general path (its table told that it
// does not own every key group), under every TTL update type, visibility
// and per-access cleanup; every result, the entries left and the values
// behind them must agree.
func TestTTL_DirectPathAsGeneral(tt *testing.T) {
	rapid.Check(tt, func(t *rapid.T) {
		noErr := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		cfg := TTL{
			Duration:         time.Duration(rapid.Int64Range(1, 50).Draw(t, "ttl")) * time.Millisecond,
			Update:           TTLUpdate(rapid.IntRange(0, 1).Draw(t, "update")),
			Visibility:       TTLVisibility(rapid.IntRange(0, 1).Draw(t, "visibility")),
			CleanupPerAccess: rapid.SampledFrom([]int{0, 0, 3}).Draw(t, "cleanup"),
		}
		direct, general := newTTLTable(tt), newTTLTable(tt)
		general.ownsAll = false
		vd, err := NewValueWithTTL(direct.Table, "v", Int64, Void, Int64, -1, cfg)
		noErr(err)
		vg, err := NewValueWithTTL(general.Table, "v", Int64, Void, Int64, -1, cfg)
		noErr(err)
		cd, cg := vd.ttl.(*ttlCells[int64, VoidNamespace, int64]), vg.ttl.(*ttlCells[int64, VoidNamespace, int64])
		if !cd.direct8() || cg.direct8() {
			t.Fatal("the two states do not take the two paths")
		}
		inc := func(n int64) int64 { return n + 1 }
		for step := range rapid.IntRange(1, 80).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "tick") {
				now := direct.now + rapid.Int64Range(0, 30).Draw(t, "dt")
				direct.now, general.now = now, now
			}
			k := rapid.Int64Range(-3, 3).Draw(t, "key")
			switch op := rapid.IntRange(0, 4).Draw(t, "op"); op {
			case 0:
				a, errA := vd.Get(k, void)
				b, errB := vg.Get(k, void)
				if a != b || (errA == nil) != (errB == nil) {
					t.Fatalf("step %d: Get(%d) at %d: direct %d, %v; general %d, %v", step, k, direct.now, a, errA, b, errB)
				}
			case 1:
				a, okA, errA := vd.Lookup(k, void)
				b, okB, errB := vg.Lookup(k, void)
				if a != b || okA != okB || (errA == nil) != (errB == nil) {
					t.Fatalf("step %d: Lookup(%d) at %d: direct %d, %v, %v; general %d, %v, %v", step, k, direct.now, a, okA, errA, b, okB, errB)
				}
			case 2:
				v := rapid.Int64Range(0, 9).Draw(t, "v")
				noErr(vd.Put(k, void, v))
				noErr(vg.Put(k, void, v))
			case 3:
				noErr(vd.Update(k, void, inc))
				noErr(vg.Update(k, void, inc))
			case 4:
				noErr(vd.Clear(k, void))
				noErr(vg.Clear(k, void))
			}
			if a, b := vd.Count(), vg.Count(); a != b {
				t.Fatalf("step %d: %d entries on the direct path, %d on the general", step, a, b)
			}
		}
		for k := int64(-3); k <= 3; k++ { // what is held, expired or not
			a, okA := cd.m.k8.GetHashed(cd.locate8(k), cow.NoKey{})
			b, okB := cg.m.k8.GetHashed(cg.locate8(k), cow.NoKey{})
			if a != b || okA != okB {
				t.Fatalf("key %d held as %+v, %v on the direct path, %+v, %v on the general", k, a, okA, b, okB)
			}
		}
	})
}
