package bench

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

var void = statetable.VoidNamespace{}

func newBackend(b *testing.B) *cowstate.Backend {
	be, err := cowstate.New(cowstate.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return be
}

// BenchmarkValueUpdate is the read-modify-write of a per-key counter, the
// commonest keyed-state access: size keys (random int64), random access.
// impl=cowstate goes through a value state (encode the key, hash it, check
// its key group, get, put); impl=gomap is the naive in-memory backend, a
// map[string]int64 keyed by the encoded key. The ttl= runs are the value
// state with its TTL off and on (see valueUpdateTTL); impl=cowstate-update
// is impl=cowstate's read-modify-write as one ValueState.Update call.
func BenchmarkValueUpdate(b *testing.B) {
	for _, size := range []int{1_000_000} {
		keys := randomKeys(size)
		b.Run(fmt.Sprintf("size=%d/impl=cowstate", size), func(b *testing.B) {
			be := newBackend(b)
			v, err := cowstate.NamespacedValue(be, "count", statetable.Int64, statetable.Void, statetable.Int64, 0)
			if err != nil {
				b.Fatal(err)
			}
			valueUpdate(b, v, keys, nil)
		})
		b.Run(fmt.Sprintf("size=%d/impl=cowstate-update", size), func(b *testing.B) {
			be := newBackend(b)
			v, err := cowstate.NamespacedValue(be, "count", statetable.Int64, statetable.Void, statetable.Int64, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range keys {
				if err := v.Put(k, void, 1); err != nil {
					b.Fatal(err)
				}
			}
			p := newPicker(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Update(keys[p.next()], void, increment); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%d/impl=gomap", size), func(b *testing.B) {
			m := make(map[string]int64)
			var buf []byte
			for _, k := range keys {
				buf = statetable.Int64.Append(buf[:0], k)
				m[string(buf)] = 1
			}
			p := newPicker(size)
			b.ReportAllocs()
			for b.Loop() {
				buf = statetable.Int64.Append(buf[:0], keys[p.next()])
				m[string(buf)]++
			}
		})
		valueUpdateTTL(b, size, keys)
	}
}

func increment(n int64) int64 { return n + 1 }

// incrementAt is increment as UpdateEach's f.
func incrementAt(_ int, n int64) int64 { return n + 1 }

// BenchmarkListAdd appends to the list state of random keys (100000 keys):
// one Add at a time, or impl=cowstate-addeach by AddEach in batches of
// 1024.
func BenchmarkListAdd(b *testing.B) {
	const size = 100_000
	keys := randomKeys(size)
	b.Run("impl=cowstate-addeach", func(b *testing.B) {
		l, err := cowstate.List[int64, int64](newBackend(b), "events")
		if err != nil {
			b.Fatal(err)
		}
		p := newPicker(size)
		batch := make([]int64, jobBatch)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			batch[i%jobBatch] = keys[p.next()]
			i++
			if i%jobBatch == 0 {
				from := int64(i - jobBatch)
				if err := l.AddEach(batch, func(j int) int64 { return from + int64(j) }); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=cowstate", func(b *testing.B) {
		be := newBackend(b)
		l, err := cowstate.NamespacedList(be, "events", statetable.Int64, statetable.Void, statetable.Int64)
		if err != nil {
			b.Fatal(err)
		}
		p := newPicker(size)
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			if err := l.Add(keys[p.next()], void, i); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("impl=gomap", func(b *testing.B) {
		m := make(map[string][]int64)
		var buf []byte
		p := newPicker(size)
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			buf = statetable.Int64.Append(buf[:0], keys[p.next()])
			m[string(buf)] = append(m[string(buf)], i)
			i++
		}
	})
}

// BenchmarkMapStatePut puts random user keys into one map state of entries
// entries, with a snapshot taken (and the previous released) every 1000
// puts, and reports the bytes allocated per put: O(log n) for cowstate,
// where the naive backend deep-copies the map for every snapshot.
func BenchmarkMapStatePut(b *testing.B) {
	for _, entries := range []int{1_000_000} {
		uks := randomKeys(entries)
		b.Run(fmt.Sprintf("entries=%d/impl=cowstate", entries), func(b *testing.B) {
			be := newBackend(b)
			ms, err := cowstate.NamespacedMap(be, "m", statetable.Int64, statetable.Void, statetable.Int64, statetable.Int64)
			if err != nil {
				b.Fatal(err)
			}
			for i, uk := range uks {
				ms.Put(1, void, uk, int64(i))
			}
			snap := be.Snapshot()
			p := newPicker(entries)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := ms.Put(1, void, uks[p.next()], int64(i)); err != nil {
					b.Fatal(err)
				}
				i++
				if i%1000 == 0 {
					snap.Release()
					snap = be.Snapshot()
				}
			}
			snap.Release()
			if n, _ := ms.Len(1, void); n != entries {
				b.Fatalf("map holds %d entries, want %d", n, entries)
			}
		})
		b.Run(fmt.Sprintf("entries=%d/impl=gomap", entries), func(b *testing.B) {
			m := make(map[int64]int64, entries)
			for i, uk := range uks {
				m[uk] = int64(i)
			}
			snap := cloneMap(m)
			p := newPicker(entries)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m[uks[p.next()]] = int64(i)
				i++
				if i%1000 == 0 {
					snap = cloneMap(m)
				}
			}
			_ = snap
		})
	}
}

func cloneMap(m map[int64]int64) map[int64]int64 {
	c := make(map[int64]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// BenchmarkValueGet reads the per-key int64 count of keys random keys,
// each a value state's key through the public API, in batches of
// jobBatch keys drawn uniform: impl=cowstate-get reads each by
// ValueState.Get, impl=cowstate-geteach a batch by one ValueState.GetEach,
// impl=map is the builtin map[int64]int64. An op is one read; every value
// read is checked.
func BenchmarkValueGet(b *testing.B) {
	for _, size := range []int{1_000_000, 10_000_000} {
		keys := randomKeys(size)
		for _, impl := range []string{"cowstate-get", "cowstate-geteach", "map"} {
			b.Run(fmt.Sprintf("keys=%d/impl=%s", size, impl), func(b *testing.B) {
				var read func(batch []int64, idx []int)
				bad := 0
				switch impl {
				case "map":
					m := make(map[int64]int64, size)
					for i, k := range keys {
						m[k] = int64(i)
					}
					read = func(batch []int64, idx []int) {
						for j, k := range batch {
							if m[k] != int64(idx[j]) {
								bad++
							}
						}
					}
				default:
					be := newBackend(b)
					v, err := cowstate.Value[int64, int64](be, "count")
					if err != nil {
						b.Fatal(err)
					}
					for i, k := range keys {
						if err := v.Put(k, int64(i)); err != nil {
							b.Fatal(err)
						}
					}
					if impl == "cowstate-get" {
						read = func(batch []int64, idx []int) {
							for j, k := range batch {
								if n, err := v.Get(k); err != nil || n != int64(idx[j]) {
									bad++
								}
							}
						}
					} else {
						read = func(batch []int64, idx []int) {
							if err := v.GetEach(batch, func(j int, n int64) {
								if n != int64(idx[j]) {
									bad++
								}
							}); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				p := newPicker(size)
				batch, idx := make([]int64, jobBatch), make([]int, jobBatch)
				i := 0
				for b.Loop() {
					j := i % jobBatch
					idx[j] = p.next()
					batch[j] = keys[idx[j]]
					i++
					if j == jobBatch-1 {
						read(batch, idx)
					}
				}
				if bad != 0 {
					b.Fatalf("%d reads did not find the value put", bad)
				}
			})
		}
	}
}

// regionUser is BenchmarkUpdateEach's struct key: a composite key of two
// fields, as a job keyed by a tuple has, encoded by the inferred Struct
// codec.
type regionUser struct {
	User   int64
	Region int32
}

// regionUserOf is the struct key of the i-th key k.
func regionUserOf(k int64, i int) regionUser { return regionUser{k, int32(i % 64)} }

// BenchmarkUpdateEach is BenchmarkValueGet's batches of 1024 uniform keys
// as read-modify-writes (a count a key), for the states a job has besides
// integer keys: a string key (base-36 of a random int64, about 12 bytes,
// made as the event's key is decoded, so its bytes are in cache), an
// int32 key (the key15 map, where an int64 key has the key8 map), an
// int64 key in a namespace (an int64 standing for a window's start, as a
// job that keeps one count a key and window by hand), and an int64 key
// with a TTL of an hour (the processing time pinned once a batch; the
// map keeps an expiry beside each count), and an int64 key's count as a
// reducing state's sum (Add for Update, AddEach for UpdateEach), and a
// struct of an int64 and an int32 (regionUser). Update
// one by one against UpdateEach, which prefetches each group of keys,
// and the builtin map of the same keys. ns/op is per update, the string's making included; each
// run checks the count of one key.
func BenchmarkUpdateEach(b *testing.B) {
	const size = 1_000_000
	ints := randomKeys(size)
	const window = int64(1_700_000_000_000)
	i32s := make([]int32, size) // distinct: i times an odd constant is one to one on 32 bits
	for i := range i32s {
		i32s[i] = int32(uint32(i) * 2654435761)
	}
	for _, key := range []string{"string", "int32", "int64-in-namespace", "int64-with-ttl", "int64-reducing", "struct"} {
		for _, impl := range []string{"cowstate-update", "cowstate-updateeach", "map"} {
			b.Run(fmt.Sprintf("keys=%d/key=%s/impl=%s", size, key, impl), func(b *testing.B) {
				var update func(idx []int, strs []string)
				var count func() int64 // of ints[0]
				switch {
				case key == "string" && impl == "map":
					m := make(map[string]int64, size)
					for _, k := range ints {
						m[strconv.FormatInt(k, 36)] = 0
					}
					update = func(_ []int, strs []string) {
						for _, k := range strs {
							m[k]++
						}
					}
					count = func() int64 { return m[strconv.FormatInt(ints[0], 36)] }
				case key == "string":
					v, err := cowstate.Value[string, int64](newBackend(b), "count")
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range ints {
						if err := v.Put(strconv.FormatInt(k, 36), 0); err != nil {
							b.Fatal(err)
						}
					}
					update = func(_ []int, strs []string) {
						if impl == "cowstate-update" {
							for _, k := range strs {
								if err := v.Update(k, increment); err != nil {
									b.Fatal(err)
								}
							}
						} else if err := v.UpdateEach(strs, incrementAt); err != nil {
							b.Fatal(err)
						}
					}
					count = func() int64 {
						n, err := v.Get(strconv.FormatInt(ints[0], 36))
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				case key == "int32" && impl == "map":
					m := make(map[int32]int64, size)
					for _, k := range i32s {
						m[k] = 0
					}
					update = func(idx []int, _ []string) {
						for _, i := range idx {
							m[i32s[i]]++
						}
					}
					count = func() int64 { return m[i32s[0]] }
				case key == "int32":
					v, err := cowstate.Value[int32, int64](newBackend(b), "count")
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range i32s {
						if err := v.Put(k, 0); err != nil {
							b.Fatal(err)
						}
					}
					batch := make([]int32, jobBatch)
					update = func(idx []int, _ []string) {
						if impl == "cowstate-update" {
							for _, i := range idx {
								if err := v.Update(i32s[i], increment); err != nil {
									b.Fatal(err)
								}
							}
							return
						}
						for j, i := range idx {
							batch[j] = i32s[i]
						}
						if err := v.UpdateEach(batch, incrementAt); err != nil {
							b.Fatal(err)
						}
					}
					count = func() int64 {
						n, err := v.Get(i32s[0])
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				case key == "int64-reducing" && impl == "map":
					m := make(map[int64]int64, size)
					for _, k := range ints {
						m[k] = 0
					}
					update = func(idx []int, _ []string) {
						for _, i := range idx {
							m[ints[i]] += 1
						}
					}
					count = func() int64 { return m[ints[0]] }
				case key == "int64-reducing": // a sum: Add each key (impl=cowstate-update), AddEach the batch
					r, err := cowstate.Reducing[int64, int64](newBackend(b), "count", func(acc, v int64) int64 { return acc + v })
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range ints {
						if err := r.Add(k, 0); err != nil {
							b.Fatal(err)
						}
					}
					batch := make([]int64, jobBatch)
					one := func(int) int64 { return 1 }
					update = func(idx []int, _ []string) {
						if impl == "cowstate-update" {
							for _, i := range idx {
								if err := r.Add(ints[i], 1); err != nil {
									b.Fatal(err)
								}
							}
							return
						}
						for j, i := range idx {
							batch[j] = ints[i]
						}
						if err := r.AddEach(batch, one); err != nil {
							b.Fatal(err)
						}
					}
					count = func() int64 {
						n, _, err := r.Get(ints[0])
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				case key == "struct" && impl == "map":
					m := make(map[regionUser]int64, size)
					for i, k := range ints {
						m[regionUserOf(k, i)] = 0
					}
					update = func(idx []int, _ []string) {
						for _, i := range idx {
							m[regionUserOf(ints[i], i)]++
						}
					}
					count = func() int64 { return m[regionUserOf(ints[0], 0)] }
				case key == "struct":
					v, err := cowstate.Value[regionUser, int64](newBackend(b), "count")
					if err != nil {
						b.Fatal(err)
					}
					for i, k := range ints {
						if err := v.Put(regionUserOf(k, i), 0); err != nil {
							b.Fatal(err)
						}
					}
					batch := make([]regionUser, jobBatch)
					update = func(idx []int, _ []string) {
						if impl == "cowstate-update" {
							for _, i := range idx {
								if err := v.Update(regionUserOf(ints[i], i), increment); err != nil {
									b.Fatal(err)
								}
							}
							return
						}
						for j, i := range idx {
							batch[j] = regionUserOf(ints[i], i)
						}
						if err := v.UpdateEach(batch, incrementAt); err != nil {
							b.Fatal(err)
						}
					}
					count = func() int64 {
						n, err := v.Get(regionUserOf(ints[0], 0))
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				case key == "int64-with-ttl" && impl == "map":
					type stamped struct{ n, expires int64 }
					m := make(map[int64]stamped, size)
					for _, k := range ints {
						m[k] = stamped{0, 1}
					}
					update = func(idx []int, _ []string) {
						now := time.Now().UnixMilli() // once a batch, as PinProcessingTime
						for _, i := range idx {
							e := m[ints[i]]
							m[ints[i]] = stamped{e.n + 1, now + time.Hour.Milliseconds()}
						}
					}
					count = func() int64 { return m[ints[0]].n }
				case key == "int64-with-ttl":
					be := newBackend(b)
					v, err := cowstate.ValueWithTTL[int64, int64](be, "count", ttlHour)
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range ints {
						if err := v.Put(k, 0); err != nil {
							b.Fatal(err)
						}
					}
					batch := make([]int64, jobBatch)
					update = func(idx []int, _ []string) {
						be.PinProcessingTime()
						if impl == "cowstate-update" {
							for _, i := range idx {
								if err := v.Update(ints[i], increment); err != nil {
									b.Fatal(err)
								}
							}
							return
						}
						for j, i := range idx {
							batch[j] = ints[i]
						}
						if err := v.UpdateEach(batch, incrementAt); err != nil {
							b.Fatal(err)
						}
					}
					count = func() int64 {
						n, err := v.Get(ints[0])
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				case impl == "map":
					m := make(map[[2]int64]int64, size)
					for _, k := range ints {
						m[[2]int64{k, window}] = 0
					}
					update = func(idx []int, _ []string) {
						for _, i := range idx {
							m[[2]int64{ints[i], window}]++
						}
					}
					count = func() int64 { return m[[2]int64{ints[0], window}] }
				default:
					v, err := cowstate.NamespacedValue(newBackend(b), "count", statetable.Int64, statetable.Int64, statetable.Int64, 0)
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range ints {
						if err := v.Put(k, window, 0); err != nil {
							b.Fatal(err)
						}
					}
					batch := make([]int64, jobBatch)
					update = func(idx []int, _ []string) {
						if impl == "cowstate-update" {
							for _, i := range idx {
								if err := v.Update(ints[i], window, increment); err != nil {
									b.Fatal(err)
								}
							}
							return
						}
						for j, i := range idx {
							batch[j] = ints[i]
						}
						if err := v.UpdateEach(batch, window, incrementAt); err != nil {
							b.Fatal(err)
						}
					}
					count = func() int64 {
						n, err := v.Get(ints[0], window)
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				}
				p := newPicker(size)
				idx, strs := make([]int, jobBatch), make([]string, jobBatch)
				var want int64 // updates of ints[0]
				i := 0
				for b.Loop() {
					j := i % jobBatch
					idx[j] = p.next()
					if key == "string" {
						strs[j] = strconv.FormatInt(ints[idx[j]], 36)
					}
					i++
					if j == jobBatch-1 {
						update(idx, strs)
						for _, k := range idx {
							if k == 0 {
								want++
							}
						}
					}
				}
				if got := count(); got != want {
					b.Fatalf("key %d counted %d updates, want %d", ints[0], got, want)
				}
			})
		}
	}
}
