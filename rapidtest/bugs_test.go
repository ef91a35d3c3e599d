package rapidtest

import (
	"cmp"
	"context"
	"errors"
	"hash/maphash"
	"io"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// The planted bugs: each backend below is cowstate's behind the contract
// adapter, with one rule of the contract broken the way a real backend
// might break it. TestSuite_CatchesPlantedBugs asserts that the suite
// catches every one; the list is in the package doc.

// bug is one planted bug and how the suite is run against it.
type bug struct {
	name  string
	group string // what it is about: the Contract method and operation group
	new   func(Config) Backend
	opts  Options
}

// timerGroups runs the machines that drive timers, as a backend author
// whose change touches only timers would.
var timerGroups = AllGroups &^ (GroupState | GroupMerge)

func newCow(cfg Config) Backend {
	b, err := contract.New(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

// withTyped returns a constructor that registers typed states (with the
// contract's codecs, so the adapter takes them as its own) before the
// adapter does: a way to plant a wrong fixed function.
func withTyped(register func(b *cowstate.Backend) error) func(Config) Backend {
	return func(cfg Config) Backend {
		b, err := cowstate.New(cfg)
		if err != nil {
			panic(err)
		}
		if err := register(b); err != nil {
			panic(err)
		}
		return contract.Of(b)
	}
}

var str = statetable.String

// badAggregate is contract.Aggregate with one step changed.
type badAggregate struct {
	contract.Aggregate
	noInitial, identityResult, swappedMerge bool
}

func (a badAggregate) CreateAccumulator() string {
	if a.noInitial {
		return ""
	}
	return a.Aggregate.CreateAccumulator()
}
func (a badAggregate) Result(acc string) string {
	if a.identityResult {
		return acc
	}
	return a.Aggregate.Result(acc)
}
func (a badAggregate) Merge(x, y string) string {
	if a.swappedMerge {
		return a.Aggregate.Merge(y, x)
	}
	return a.Aggregate.Merge(x, y)
}

func aggregating(fn badAggregate) func(Config) Backend {
	return withTyped(func(b *cowstate.Backend) error {
		_, err := cowstate.NamespacedAggregating(b, "aggregating", str, str, str, fn)
		return err
	})
}

// Views.

// aliasing returns views that read the live state.
type aliasing struct{ Backend }

type aliasView struct {
	contract.View
	live Backend
}

func (a aliasing) Capture() contract.View { return aliasView{a.Backend.Capture(), a.Backend} }
func (v aliasView) StateEntries(s string) ([]contract.Entry, error) {
	return v.live.StateEntries(s)
}

// countsViews counts the live views (the suite releases on the writer
// goroutine, and so does this count).
type countsViews struct {
	Backend
	live *[]*countedView
}

type countedView struct {
	contract.View
	once  sync.Once
	owner countsViews
}

func (c countsViews) Capture() contract.View {
	v := &countedView{View: c.Backend.Capture(), owner: c}
	*c.live = append(*c.live, v)
	return v
}

func (v *countedView) Release() {
	v.once.Do(func() {
		*v.owner.live = slices.DeleteFunc(*v.owner.live, func(w *countedView) bool { return w == v })
	})
	v.View.Release()
}

// lostDelete loses ClearState of an owned key while a view is live.
type lostDelete struct{ countsViews }

func (l lostDelete) ClearState(state, key, ns string) error {
	if len(*l.live) > 0 && l.KeyGroups().Contains(statetable.KeyGroupOfKey([]byte(key), l.MaxParallelism())) {
		return nil
	}
	return l.Backend.ClearState(state, key, ns)
}

// releaseAll: releasing one view releases every live view.
type releaseAll struct{ countsViews }

func (r releaseAll) Capture() contract.View {
	return &releasesAll{r.countsViews.Capture().(*countedView)}
}

type releasesAll struct{ *countedView }

func (v *releasesAll) Release() {
	for _, w := range slices.Clone(*v.owner.live) {
		w.Release()
	}
	v.countedView.Release()
}

// writeReleases: WriteSnapshot releases the view it writes.
type writeReleases struct{ Backend }
type releasingView struct{ contract.View }

func (w writeReleases) Capture() contract.View { return releasingView{w.Backend.Capture()} }
func (v releasingView) WriteSnapshot(ctx context.Context, out io.Writer) error {
	defer v.View.Release()
	return v.View.WriteSnapshot(ctx, out)
}

// Restores and rescales.

// dropKeys clears every entry and timer of the keys drop selects.
func dropKeys(c Backend, drop func(key string) bool, domainsToDrop ...timerqueue.Domain) {
	for _, s := range stateNames {
		es, _ := c.StateEntries(s)
		for _, e := range es {
			if drop(e.Key) {
				c.ClearState(s, e.Key, e.Namespace)
			}
		}
	}
	if len(domainsToDrop) == 0 {
		domainsToDrop = domains
	}
	for _, s := range services {
		for _, d := range domainsToDrop {
			ts, _ := c.TimerEntries(s, d) // no such service: nothing to drop
			for _, t := range ts {
				if drop(t.Key) {
					c.DeleteTimer(s, d, t.Key, t.Namespace, t.Timestamp)
				}
			}
		}
	}
}

// dropsLastGroup loses the last key group it owns when it restores.
type dropsLastGroup struct{ Backend }

func (d dropsLastGroup) RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error {
	if err := d.Backend.RestoreSnapshot(ctx, r, size); err != nil {
		return err
	}
	last := d.KeyGroups().Last
	dropKeys(d.Backend, func(key string) bool { return statetable.KeyGroupOfKey([]byte(key), d.MaxParallelism()) == last })
	return nil
}

// dropsProcessingTimers loses the processing-time timers when it restores.
type dropsProcessingTimers struct{ Backend }

func (d dropsProcessingTimers) RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error {
	if err := d.Backend.RestoreSnapshot(ctx, r, size); err != nil {
		return err
	}
	dropKeys(d.Backend, func(string) bool { return true }, timerqueue.ProcessingTime)
	return nil
}

// ownsAll owns every key group but reports the configured ones, and
// checks ownership itself with own: a wrong hash, or none.
type ownsAll struct {
	Backend
	owned statetable.KeyGroupRange
	own   func(key string) bool
}

func newOwnsAll(cfg Config, own func(o ownsAll, key string) bool) Backend {
	owned := statetable.AllKeyGroups(cfg.MaxParallelism)
	if cfg.KeyGroups != nil {
		owned = *cfg.KeyGroups
	}
	cfg.KeyGroups = nil
	o := ownsAll{Backend: newCow(cfg), owned: owned}
	o.own = func(key string) bool { return own(o, key) }
	return o
}

var errNotOwned = statetable.ErrKeyGroupNotOwned

func (o ownsAll) KeyGroups() statetable.KeyGroupRange { return o.owned }
func (o ownsAll) check(key string) error {
	if !o.own(key) {
		return errNotOwned
	}
	return nil
}
func (o ownsAll) Put(s, k, ns, v string) error {
	if err := o.check(k); err != nil {
		return err
	}
	return o.Backend.Put(s, k, ns, v)
}
func (o ownsAll) Add(s, k, ns, v string) error {
	if err := o.check(k); err != nil {
		return err
	}
	return o.Backend.Add(s, k, ns, v)
}
func (o ownsAll) RegisterTimer(s string, d timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	if err := o.check(k); err != nil {
		return false, err
	}
	return o.Backend.RegisterTimer(s, d, k, ns, ts)
}
func (o ownsAll) RestoreSnapshot(ctx context.Context, rd io.ReaderAt, size int64) error {
	if err := o.Backend.RestoreSnapshot(ctx, rd, size); err != nil {
		return err
	}
	dropKeys(o.Backend, func(key string) bool { return !o.own(key) })
	return nil
}

var processSeed = maphash.MakeSeed()

// randomHash: key groups from a per-process random hash.
func newRandomHash(cfg Config) Backend {
	return newOwnsAll(cfg, func(o ownsAll, key string) bool {
		return o.owned.Contains(int(maphash.String(processSeed, key) % uint64(o.MaxParallelism())))
	})
}

// keepsUnowned: a restore target keeps every key group of the snapshot
// (it checks ownership only on writes).
func newKeepsUnowned(cfg Config) Backend {
	o := newOwnsAll(cfg, func(o ownsAll, key string) bool {
		return o.owned.Contains(statetable.KeyGroupOfKey([]byte(key), o.MaxParallelism()))
	}).(ownsAll)
	return keepsUnowned{o}
}

type keepsUnowned struct{ ownsAll }

func (k keepsUnowned) RestoreSnapshot(ctx context.Context, rd io.ReaderAt, size int64) error {
	return k.ownsAll.Backend.RestoreSnapshot(ctx, rd, size)
}

// roundedMaxPar computes key groups over the max parallelism rounded up
// to a power of two, and reports the configured one.
type roundedMaxPar struct {
	Backend
	maxPar int
}

func newRoundedMaxPar(cfg Config) Backend {
	n := cfg.MaxParallelism
	cfg.MaxParallelism = 1 << bits.Len(uint(n-1))
	return roundedMaxPar{newCow(cfg), n}
}

func (r roundedMaxPar) MaxParallelism() int { return r.maxPar }

// Timers.

// fireByHand fires timers of a domain one at a time through the contract's
// own methods: the due timers (due says which) in the order cmp gives,
// looking again after each callback. keepFailed false loses the timer
// whose callback failed.
func fireByHand(c Backend, service string, d timerqueue.Domain, due func(ts int64) bool, order func(a, b timer) int, keepFailed bool, fire contract.FireFunc) (int, error) {
	for fired := 0; ; fired++ {
		all, err := c.TimerEntries(service, d)
		if err != nil {
			return fired, err
		}
		var next []timer
		for _, t := range all {
			if due(t.Timestamp) {
				next = append(next, t)
			}
		}
		if len(next) == 0 {
			return fired, nil
		}
		t := slices.MinFunc(next, order)
		c.DeleteTimer(service, d, t.Key, t.Namespace, t.Timestamp)
		if err := fire(t.Key, t.Namespace, t.Timestamp); err != nil {
			if keepFailed {
				c.RegisterTimer(service, d, t.Key, t.Namespace, t.Timestamp)
			}
			return fired, err
		}
	}
}

func upTo(wm int64) func(int64) bool { return func(ts int64) bool { return ts <= wm } }

// tieFlipped fires event-time timers of equal timestamp in reverse order.
type tieFlipped struct{ Backend }

func (f tieFlipped) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return fireByHand(f.Backend, service, timerqueue.EventTime, upTo(wm), func(a, b timer) int {
		return cmp.Or(cmp.Compare(a.Timestamp, b.Timestamp), -compareTimers(a, b))
	}, true, fire)
}

// unsignedOrder orders and compares timestamps as unsigned numbers (a
// big-endian encoding without the sign bit flipped): negative timestamps
// are due last.
type unsignedOrder struct{ Backend }

func (f unsignedOrder) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return fireByHand(f.Backend, service, timerqueue.EventTime, func(ts int64) bool { return uint64(ts) <= uint64(wm) },
		func(a, b timer) int {
			return cmp.Or(cmp.Compare(uint64(a.Timestamp), uint64(b.Timestamp)), compareTimers(a, b))
		}, true, fire)
}

// watermarkExclusive fires event-time timers strictly before the watermark.
type watermarkExclusive struct{ Backend }

func (f watermarkExclusive) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return fireByHand(f.Backend, service, timerqueue.EventTime, func(ts int64) bool { return ts < wm }, compareTimers, true, fire)
}

// processingExclusive fires processing-time timers strictly before now.
type processingExclusive struct {
	Backend
	clock func() int64
}

func (f processingExclusive) AdvanceProcessingTime(service string, fire contract.FireFunc) (int, error) {
	now := f.clock()
	return fireByHand(f.Backend, service, timerqueue.ProcessingTime, func(ts int64) bool { return ts < now }, compareTimers, true, fire)
}

// failedTimerLost does not register again the timer whose callback failed.
type failedTimerLost struct{ Backend }

func (f failedTimerLost) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return fireByHand(f.Backend, service, timerqueue.EventTime, upTo(wm), compareTimers, false, fire)
}

// lateNotFired fires only the timers due when it starts: not one that a
// callback registers, even when it is due.
type lateNotFired struct{ Backend }

func (f lateNotFired) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	all, err := f.TimerEntries(service, timerqueue.EventTime)
	if err != nil {
		return 0, err
	}
	atStart := map[timer]bool{}
	for _, t := range all {
		atStart[t] = true
	}
	n, err := fireByHand(f.Backend, service, timerqueue.EventTime, upTo(wm), func(a, b timer) int {
		if atStart[a] != atStart[b] { // the timers there at the start first
			if atStart[a] {
				return -1
			}
			return 1
		}
		return compareTimers(a, b)
	}, true, func(key, ns string, ts int64) error {
		if !atStart[timer{Timestamp: ts, Key: key, Namespace: ns}] {
			f.RegisterTimer(service, timerqueue.EventTime, key, ns, ts) // put back, unfired
			return errStop
		}
		return fire(key, ns, ts)
	})
	if errors.Is(err, errStop) {
		return n, nil
	}
	return n, err
}

var errStop = errors.New("stop")

// duplicateIsNew reports every registered timer as new.
type duplicateIsNew struct{ Backend }

func (d duplicateIsNew) RegisterTimer(s string, dom timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	_, err := d.Backend.RegisterTimer(s, dom, k, ns, ts)
	return err == nil, err
}

// deleteIgnoresNamespace deletes the timers of the key and timestamp in
// every namespace.
type deleteIgnoresNamespace struct{ Backend }

func (d deleteIgnoresNamespace) DeleteTimer(s string, dom timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	found, err := d.Backend.DeleteTimer(s, dom, k, ns, ts)
	if err != nil {
		return false, err
	}
	all, _ := d.TimerEntries(s, dom)
	for _, t := range all {
		if t.Key == k && t.Timestamp == ts {
			d.Backend.DeleteTimer(s, dom, t.Key, t.Namespace, t.Timestamp)
		}
	}
	return found, nil
}

// deleteMixesDomains deletes, when asked to delete a processing-time timer
// that does not exist, the event-time timer of the same key, namespace and
// timestamp: two domains kept in one structure and told apart wrongly.
type deleteMixesDomains struct{ Backend }

func (d deleteMixesDomains) DeleteTimer(s string, dom timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	found, err := d.Backend.DeleteTimer(s, dom, k, ns, ts)
	if err != nil || found || dom != timerqueue.ProcessingTime {
		return found, err
	}
	return d.Backend.DeleteTimer(s, timerqueue.EventTime, k, ns, ts)
}

// serviceAgainClears: registering a timer service again drops its timers.
type serviceAgainClears struct {
	Backend
	registered map[string]bool
}

func (r serviceAgainClears) RegisterTimerService(name string) error {
	if r.registered[name] {
		for _, d := range domains {
			ts, _ := r.TimerEntries(name, d)
			for _, t := range ts {
				r.DeleteTimer(name, d, t.Key, t.Namespace, t.Timestamp)
			}
		}
	}
	r.registered[name] = true
	return r.Backend.RegisterTimerService(name)
}

// autoService registers an unknown timer service on first use instead of
// failing.
type autoService struct{ Backend }

func (a autoService) RegisterTimer(s string, d timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	ok, err := a.Backend.RegisterTimer(s, d, k, ns, ts)
	if errors.Is(err, contract.ErrUnknownTimerService) {
		a.Backend.RegisterTimerService(s)
		return a.Backend.RegisterTimer(s, d, k, ns, ts)
	}
	return ok, err
}

// cutKeys stores keys cut by cutKey, in states and timers: a C-string key
// (cut at the first zero byte) or a length limit.
type cutKeys struct {
	Backend
	cut func(string) string
}

func cutAtZero(k string) string {
	if i := strings.IndexByte(k, 0); i >= 0 {
		return k[:i]
	}
	return k
}

func cutAt1KiB(k string) string { return k[:min(len(k), 1024)] }

func (c cutKeys) RegisterTimer(s string, d timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	return c.Backend.RegisterTimer(s, d, c.cut(k), ns, ts)
}
func (c cutKeys) DeleteTimer(s string, d timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	return c.Backend.DeleteTimer(s, d, c.cut(k), ns, ts)
}

// cutStateKeys cuts the keys of state operations too.
type cutStateKeys struct{ cutKeys }

func (c cutStateKeys) Put(s, k, ns, v string) error { return c.Backend.Put(s, c.cut(k), ns, v) }
func (c cutStateKeys) Get(s, k, ns string) (string, bool, error) {
	return c.Backend.Get(s, c.cut(k), ns)
}
func (c cutStateKeys) Add(s, k, ns, v string) error { return c.Backend.Add(s, c.cut(k), ns, v) }
func (c cutStateKeys) GetList(s, k, ns string) ([]string, error) {
	return c.Backend.GetList(s, c.cut(k), ns)
}
func (c cutStateKeys) UpdateList(s, k, ns string, es []string) error {
	return c.Backend.UpdateList(s, c.cut(k), ns, es)
}
func (c cutStateKeys) PutMapEntry(s, k, ns, uk, uv string) error {
	return c.Backend.PutMapEntry(s, c.cut(k), ns, uk, uv)
}
func (c cutStateKeys) GetMapEntry(s, k, ns, uk string) (string, bool, error) {
	return c.Backend.GetMapEntry(s, c.cut(k), ns, uk)
}
func (c cutStateKeys) RemoveMapEntry(s, k, ns, uk string) error {
	return c.Backend.RemoveMapEntry(s, c.cut(k), ns, uk)
}
func (c cutStateKeys) ClearState(s, k, ns string) error { return c.Backend.ClearState(s, c.cut(k), ns) }
func (c cutStateKeys) MergeNamespaces(s, k, target string, srcs []string) error {
	return c.Backend.MergeNamespaces(s, c.cut(k), target, srcs)
}

// Merges.

// mergeReversed processes the sources in reverse order.
type mergeReversed struct{ Backend }

func (m mergeReversed) MergeNamespaces(s, k, target string, srcs []string) error {
	srcs = slices.Clone(srcs)
	slices.Reverse(srcs)
	return m.Backend.MergeNamespaces(s, k, target, srcs)
}

// mergeIntoSelf does not skip a source equal to the target of a list
// state: the target's list is appended to itself.
type mergeIntoSelf struct{ Backend }

func (m mergeIntoSelf) MergeNamespaces(s, k, target string, srcs []string) error {
	if slices.Contains(srcs, target) {
		if l, err := m.GetList(s, k, target); err == nil && len(l) > 0 {
			m.UpdateList(s, k, target, append(l, l...))
		}
	}
	return m.Backend.MergeNamespaces(s, k, target, srcs)
}

// State kinds.

// putEmptyStores stores "" as a value instead of clearing the entry.
func newPutEmptyStores(cfg Config) Backend {
	var v *statetable.ValueState[string, string, string]
	c := withTyped(func(b *cowstate.Backend) (err error) {
		v, err = cowstate.NamespacedValue(b, "value", str, str, str, "")
		return err
	})(cfg)
	return putEmptyStores{c, v}
}

type putEmptyStores struct {
	Backend
	v *statetable.ValueState[string, string, string]
}

func (p putEmptyStores) Put(s, k, ns, v string) error {
	if s == "value" && v == "" && p.KeyGroups().Contains(statetable.KeyGroupOfKey([]byte(k), p.MaxParallelism())) {
		return p.v.Put(k, ns, "")
	}
	return p.Backend.Put(s, k, ns, v)
}

// reduceFirstFolds folds the first value of a reducing state into an
// empty accumulator instead of keeping it as it is.
type reduceFirstFolds struct{ Backend }

func (r reduceFirstFolds) Add(s, k, ns, v string) error {
	if s == "reducing" {
		if _, ok, err := r.Get(s, k, ns); err == nil && !ok {
			v = contract.Reduce("", v)
		}
	}
	return r.Backend.Add(s, k, ns, v)
}

// getListDropsEmpty leaves "" elements out of GetList (a list encoding
// that ends at an empty element).
type getListDropsEmpty struct{ Backend }

func (g getListDropsEmpty) GetList(s, k, ns string) ([]string, error) {
	l, err := g.Backend.GetList(s, k, ns)
	return slices.DeleteFunc(l, func(e string) bool { return e == "" }), err
}

// updateEmptyIgnored ignores an UpdateList with no elements.
type updateEmptyIgnored struct{ Backend }

func (u updateEmptyIgnored) UpdateList(s, k, ns string, es []string) error {
	if len(es) == 0 {
		if _, err := u.GetList(s, k, ns); err != nil {
			return err
		}
		return nil
	}
	return u.Backend.UpdateList(s, k, ns, es)
}

// mapEmptyValueRemoves takes a user value "" for a removal.
type mapEmptyValueRemoves struct{ Backend }

func (m mapEmptyValueRemoves) PutMapEntry(s, k, ns, uk, uv string) error {
	if uv == "" {
		return m.RemoveMapEntry(s, k, ns, uk)
	}
	return m.Backend.PutMapEntry(s, k, ns, uk, uv)
}

// mapEmptyUserKeyAbsent reports the user key "" absent.
type mapEmptyUserKeyAbsent struct{ Backend }

func (m mapEmptyUserKeyAbsent) GetMapEntry(s, k, ns, uk string) (string, bool, error) {
	v, ok, err := m.Backend.GetMapEntry(s, k, ns, uk)
	if uk == "" && err == nil {
		return "", false, nil
	}
	return v, ok, err
}

// mapRemoveClears removes the whole map of (key, ns) instead of one user
// key.
type mapRemoveClears struct{ Backend }

func (m mapRemoveClears) RemoveMapEntry(s, k, ns, uk string) error {
	if _, ok, err := m.GetMapEntry(s, k, ns, uk); err != nil || !ok {
		return err
	}
	return m.ClearState(s, k, ns)
}

// clearAllNamespaces clears the key in every namespace (a prefix delete
// over the key's bytes).
type clearAllNamespaces struct{ Backend }

func (c clearAllNamespaces) ClearState(s, k, ns string) error {
	if err := c.Backend.ClearState(s, k, ns); err != nil {
		return err
	}
	es, _ := c.StateEntries(s)
	for _, e := range es {
		if e.Key == k {
			c.Backend.ClearState(s, e.Key, e.Namespace)
		}
	}
	return nil
}

// registerAgainClears: registering a state again drops its entries.
type registerAgainClears struct {
	Backend
	registered map[string]bool
}

func (r registerAgainClears) RegisterState(name string, kind statetable.Kind) error {
	if err := r.Backend.RegisterState(name, kind); err != nil {
		return err
	}
	if r.registered[name] {
		es, _ := r.StateEntries(name)
		for _, e := range es {
			r.ClearState(name, e.Key, e.Namespace)
		}
	}
	r.registered[name] = true
	return nil
}

// ttlGroups runs the state machine with TTL states, as a backend author
// whose change touches only TTL would.
var ttlGroups = GroupState | GroupMerge | GroupSnapshots | GroupWrites | GroupRescale | GroupTTL

// ttlBackend is the cowstate adapter as a contract.TTLBackend.
func ttlBackend(cfg Config) contract.TTLBackend { return newCow(cfg).(contract.TTLBackend) }

// ttlIgnored registers TTL states without their TTL: nothing expires.
type ttlIgnored struct{ contract.TTLBackend }

func (b ttlIgnored) RegisterStateTTL(name string, kind statetable.Kind, _ statetable.TTL) error {
	return b.RegisterState(name, kind)
}

// ttlOneLate expires everything a millisecond late (expired when the
// timestamp is below the clock, not at it).
type ttlOneLate struct{ contract.TTLBackend }

func (b ttlOneLate) RegisterStateTTL(name string, kind statetable.Kind, ttl statetable.TTL) error {
	ttl.Duration += time.Millisecond
	return b.TTLBackend.RegisterStateTTL(name, kind, ttl)
}

// ttlReadNoRefresh ignores UpdateOnReadAndWrite: reads never refresh.
type ttlReadNoRefresh struct{ contract.TTLBackend }

func (b ttlReadNoRefresh) RegisterStateTTL(name string, kind statetable.Kind, ttl statetable.TTL) error {
	ttl.Update = statetable.UpdateOnCreateAndWrite
	return b.TTLBackend.RegisterStateTTL(name, kind, ttl)
}

// ttlCleanupTooEager: the cleanup removes an entry that has not expired
// (the first of the value state with a TTL).
type ttlCleanupTooEager struct{ contract.TTLBackend }

func (b ttlCleanupTooEager) CleanupExpired(budget int) (int, int) {
	if es, _ := b.StateEntries("ttl-value"); len(es) > 0 {
		b.ClearState("ttl-value", es[0].Key, es[0].Namespace)
	}
	return b.TTLBackend.CleanupExpired(budget)
}

// ttlListPerList: adding to a list with a TTL rewrites the list, so every
// element takes the new timestamp (a TTL per list, not per element).
type ttlListPerList struct{ contract.TTLBackend }

func (b ttlListPerList) Add(s, k, ns, v string) error {
	if s != "ttl-list" {
		return b.TTLBackend.Add(s, k, ns, v)
	}
	l, err := b.GetList(s, k, ns)
	if err != nil {
		return err
	}
	return b.UpdateList(s, k, ns, append(l, v))
}

// plantedBugs is every planted bug, grouped as the package doc lists them.
var plantedBugs = []bug{
	// Views.
	{name: "aliasing-view", group: "Capture (views)", new: func(cfg Config) Backend { return aliasing{newCow(cfg)} },
		// Views are read on the writing goroutine in GroupWrites: reading
		// the live state there is a data race, which -race reports itself.
		opts: Options{Groups: AllGroups &^ GroupWrites}},
	{name: "lost-delete-under-view", group: "ClearState (views)", new: func(cfg Config) Backend {
		return lostDelete{countsViews{newCow(cfg), new([]*countedView)}}
	}},
	{name: "release-releases-all-views", group: "View.Release (views)", new: func(cfg Config) Backend {
		return releaseAll{countsViews{newCow(cfg), new([]*countedView)}}
	}},
	{name: "write-releases-view", group: "View.WriteSnapshot (writes)", new: func(cfg Config) Backend { return writeReleases{newCow(cfg)} }},
	// Restores and rescales.
	{name: "restore-drops-last-key-group", group: "RestoreSnapshot (restores)", new: func(cfg Config) Backend { return dropsLastGroup{newCow(cfg)} }},
	{name: "restore-drops-processing-timers", group: "RestoreSnapshot (restores, timers)", new: func(cfg Config) Backend { return dropsProcessingTimers{newCow(cfg)} }},
	{name: "restore-keeps-unowned-key-groups", group: "RestoreSnapshot (rescales)", new: newCow,
		opts: Options{NewRestoreTarget: newKeepsUnowned}},
	{name: "random-hash-key-groups", group: "KeyGroups (rescales)", new: newRandomHash},
	{name: "owns-every-key-group", group: "KeyGroups (rescales)", new: func(cfg Config) Backend {
		return newOwnsAll(cfg, func(ownsAll, string) bool { return true })
	}},
	{name: "max-parallelism-rounded-up", group: "MaxParallelism (rescales)", new: newRoundedMaxPar},
	// Timers.
	{name: "timer-tie-order-flipped", group: "AdvanceWatermark (timers)", new: func(cfg Config) Backend { return tieFlipped{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "timer-registered-while-firing-not-fired", group: "AdvanceWatermark (timers)", new: func(cfg Config) Backend { return lateNotFired{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "negative-timestamps-unsigned", group: "AdvanceWatermark (timers)", new: func(cfg Config) Backend { return unsignedOrder{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "watermark-exclusive", group: "AdvanceWatermark (timers)", new: func(cfg Config) Backend { return watermarkExclusive{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "processing-time-exclusive", group: "AdvanceProcessingTime (timers)", new: func(cfg Config) Backend {
		return processingExclusive{newCow(cfg), cfg.Clock}
	}, opts: Options{Groups: timerGroups}},
	{name: "failed-timer-lost", group: "AdvanceWatermark (timers)", new: func(cfg Config) Backend { return failedTimerLost{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "duplicate-timer-reported-new", group: "RegisterTimer (timers)", new: func(cfg Config) Backend { return duplicateIsNew{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "delete-timer-ignores-namespace", group: "DeleteTimer (timers)", new: func(cfg Config) Backend { return deleteIgnoresNamespace{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "delete-timer-mixes-domains", group: "DeleteTimer (timers)", new: func(cfg Config) Backend { return deleteMixesDomains{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "service-registered-again-cleared", group: "RegisterTimerService (timers)", new: func(cfg Config) Backend {
		return serviceAgainClears{newCow(cfg), map[string]bool{}}
	}, opts: Options{Groups: timerGroups}},
	{name: "unregistered-service-accepted", group: "RegisterTimer (timers)", new: func(cfg Config) Backend { return autoService{newCow(cfg)} }, opts: Options{Groups: timerGroups}},
	{name: "timer-key-cut-at-zero-byte", group: "TimerEntries (timers)", new: func(cfg Config) Backend { return cutKeys{newCow(cfg), cutAtZero} }, opts: Options{Groups: timerGroups}},
	// Merges.
	{name: "merge-sources-reversed", group: "MergeNamespaces (merges)", new: func(cfg Config) Backend { return mergeReversed{newCow(cfg)} }},
	{name: "merge-into-itself", group: "MergeNamespaces (merges)", new: func(cfg Config) Backend { return mergeIntoSelf{newCow(cfg)} }},
	{name: "aggregate-merge-swapped", group: "MergeNamespaces (merges, aggregating)", new: aggregating(badAggregate{swappedMerge: true})},
	// State kinds.
	{name: "put-empty-stores-empty", group: "Put (value)", new: newPutEmptyStores},
	{name: "reduce-first-value-folded", group: "Add (reducing)", new: func(cfg Config) Backend { return reduceFirstFolds{newCow(cfg)} }},
	{name: "reduce-operands-swapped", group: "Add (reducing)", new: withTyped(func(b *cowstate.Backend) error {
		_, err := cowstate.NamespacedReducing(b, "reducing", str, str, str, func(acc, v string) string { return contract.Reduce(v, acc) })
		return err
	})},
	{name: "aggregate-without-initial-accumulator", group: "Add (aggregating)", new: aggregating(badAggregate{noInitial: true})},
	{name: "aggregate-result-is-accumulator", group: "Get (aggregating)", new: aggregating(badAggregate{identityResult: true})},
	{name: "get-list-drops-empty-elements", group: "GetList (list)", new: func(cfg Config) Backend { return getListDropsEmpty{newCow(cfg)} }},
	{name: "update-list-empty-ignored", group: "UpdateList (list)", new: func(cfg Config) Backend { return updateEmptyIgnored{newCow(cfg)} }},
	{name: "map-empty-value-removes", group: "PutMapEntry (map)", new: func(cfg Config) Backend { return mapEmptyValueRemoves{newCow(cfg)} }},
	{name: "map-empty-user-key-absent", group: "GetMapEntry (map)", new: func(cfg Config) Backend { return mapEmptyUserKeyAbsent{newCow(cfg)} }},
	{name: "map-remove-clears-map", group: "RemoveMapEntry (map)", new: func(cfg Config) Backend { return mapRemoveClears{newCow(cfg)} }},
	{name: "clear-every-namespace", group: "ClearState (state)", new: func(cfg Config) Backend { return clearAllNamespaces{newCow(cfg)} }},
	{name: "state-registered-again-cleared", group: "RegisterState (state)", new: func(cfg Config) Backend {
		return registerAgainClears{newCow(cfg), map[string]bool{}}
	}},
	{name: "keys-cut-at-1KiB", group: "StateEntries (state, long keys)", new: func(cfg Config) Backend {
		return cutStateKeys{cutKeys{newCow(cfg), cutAt1KiB}}
	}},
	// Time-to-live.
	{name: "ttl-ignored", group: "RegisterStateTTL (ttl)", new: func(cfg Config) Backend { return ttlIgnored{ttlBackend(cfg)} }, opts: Options{Groups: ttlGroups}},
	{name: "ttl-expires-a-millisecond-late", group: "RegisterStateTTL (ttl)", new: func(cfg Config) Backend { return ttlOneLate{ttlBackend(cfg)} }, opts: Options{Groups: ttlGroups}},
	{name: "ttl-read-does-not-refresh", group: "Get (ttl, update on read)", new: func(cfg Config) Backend { return ttlReadNoRefresh{ttlBackend(cfg)} }, opts: Options{Groups: ttlGroups}},
	{name: "ttl-cleanup-removes-live-entry", group: "CleanupExpired (ttl)", new: func(cfg Config) Backend { return ttlCleanupTooEager{ttlBackend(cfg)} }, opts: Options{Groups: ttlGroups}},
	{name: "ttl-list-per-list", group: "Add (ttl, list)", new: func(cfg Config) Backend { return ttlListPerList{ttlBackend(cfg)} }, opts: Options{Groups: ttlGroups}},
	// Schemas.
	{name: "schema-ignored", group: "RegisterStateSchema (schema)", new: func(cfg Config) Backend { return schemaIgnored{schemaBackend(cfg)} }, opts: Options{Groups: schemaGroups}},
	{name: "schema-key-codec-ignored", group: "RestoreSnapshot (schema, keys)", new: func(cfg Config) Backend { return schemaKeyIgnored{schemaBackend(cfg)} }, opts: Options{Groups: schemaGroups}},
	{name: "schema-values-not-migrated", group: "RestoreSnapshot (schema, values)", new: newSchemaNotMigrated, opts: Options{Groups: schemaGroups}},
}

// schemaGroups runs the state machine with states of schemas, as a
// backend author whose change touches only schemas would.
var schemaGroups = GroupState | GroupSnapshots | GroupWrites | GroupSchema

// schemaBackend is the cowstate adapter as a contract.SchemaBackend.
func schemaBackend(cfg Config) contract.SchemaBackend { return newCow(cfg).(contract.SchemaBackend) }

// schemaIgnored registers states without their schema: an upgrade that
// must be refused restores.
type schemaIgnored struct{ contract.SchemaBackend }

func (b schemaIgnored) RegisterStateSchema(name string, kind statetable.Kind, _ contract.Schema) error {
	return b.RegisterState(name, kind)
}

// schemaKeyIgnored registers every state with the first key and namespace
// codecs, whatever the schema says: a changed key codec restores.
type schemaKeyIgnored struct{ contract.SchemaBackend }

func (b schemaKeyIgnored) RegisterStateSchema(name string, kind statetable.Kind, s contract.Schema) error {
	s.Key, s.Namespace = 0, 0
	return b.SchemaBackend.RegisterStateSchema(name, kind, s)
}

// schemaNotMigrated reads the values a snapshot holds with the registered
// schema's own decoder, whatever schema wrote them: the bytes of another
// struct read as garbage (or fail to decode).
type schemaNotMigrated struct {
	contract.SchemaBackend
	b *cowstate.Backend
}

func newSchemaNotMigrated(cfg Config) Backend {
	b, err := cowstate.New(cfg)
	if err != nil {
		panic(err)
	}
	return schemaNotMigrated{contract.Of(b).(contract.SchemaBackend), b}
}

// RegisterStateSchema registers the typed state first, with a value codec
// of the schema's ID that does not migrate, so that the adapter takes it
// as its own.
func (n schemaNotMigrated) RegisterStateSchema(name string, kind statetable.Kind, s contract.Schema) error {
	kc, nc, vc := s.KeyCodec(), s.NamespaceCodec(), noMigration{s.ValueCodec()}
	var err error
	switch kind {
	case statetable.KindValue:
		_, err = cowstate.NamespacedValue(n.b, name, kc, nc, statetable.Codec[string](vc), "")
	case statetable.KindList:
		_, err = cowstate.NamespacedList(n.b, name, kc, nc, statetable.Codec[string](vc))
	case statetable.KindMap:
		_, err = cowstate.NamespacedMap(n.b, name, kc, nc, str, statetable.Codec[string](vc))
	case statetable.KindReducing:
		_, err = cowstate.NamespacedReducing(n.b, name, kc, nc, statetable.Codec[string](vc), contract.Reduce)
	case statetable.KindAggregating:
		_, err = cowstate.NamespacedAggregating(n.b, name, kc, nc, statetable.Codec[string](vc), statetable.AggregateFunction[string, string, string](contract.Aggregate{}))
	}
	if err != nil {
		return err
	}
	return n.SchemaBackend.RegisterStateSchema(name, kind, s)
}

// noMigration is a value codec that decodes what any codec wrote as if it
// had written it.
type noMigration struct{ statetable.Evolving[string] }

func (c noMigration) DecoderFor(string) (func([]byte) (string, error), error) { return c.Decode, nil }
