package savepoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Profile is a struct state's value: its codec is statetable.Struct, whose
// ID is the schema.
type Profile struct {
	Name  string
	Age   int32
	Score float64
	Since time.Time
}

// ProfileV2 is Profile as a later job declares it.
type ProfileV2 struct {
	Name string
	Age  int64
	City string
}

const now = 1_000_000 // the backends' processing-time clock, ms

// job is the states and timers of the test job on a backend.
type job struct {
	b       *cowstate.Backend
	count   *cowstate.ValueState[string, int64]
	name    *cowstate.ValueState[int64, string]
	profile *cowstate.ValueState[string, Profile]
	tags    *cowstate.ListState[string, string]
	seen    *cowstate.MapState[string, string, int64]
	total   *cowstate.ReducingState[string, int64]
	visits  *cowstate.ValueState[string, int64] // with a TTL
	timers  *cowstate.TimerService[string]
}

func newBackend(t *testing.T, maxPar int) *cowstate.Backend {
	t.Helper()
	b, err := cowstate.New(cowstate.Config{MaxParallelism: maxPar, Clock: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newJob registers the test job's states on a new backend.
func newJob(t *testing.T, maxPar int) *job {
	t.Helper()
	j := &job{b: newBackend(t, maxPar)}
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil && err == nil {
			err = e
		}
	}
	j.count, err = cowstate.Value[string, int64](j.b, "count")
	var e error
	j.name, e = cowstate.Value[int64, string](j.b, "name")
	must(e)
	j.profile, e = cowstate.Value[string, Profile](j.b, "profile")
	must(e)
	j.tags, e = cowstate.List[string, string](j.b, "tags")
	must(e)
	j.seen, e = cowstate.Map[string, string, int64](j.b, "seen")
	must(e)
	j.total, e = cowstate.Reducing[string](j.b, "total", func(a, b int64) int64 { return a + b })
	must(e)
	j.visits, e = cowstate.ValueWithTTL[string, int64](j.b, "visits", cowstate.TTL{Duration: time.Hour})
	must(e)
	j.timers, e = cowstate.Timers[string](j.b, "t")
	must(e)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func user(i int) string { return fmt.Sprintf("user-%03d", i) }

const users = 300

// fill writes the test content: every user has a count, a profile, a
// total, visits (TTL) and an event-time timer; every third has tags and
// every fifth a map of pages seen and a processing-time timer.
func (j *job) fill(t *testing.T) {
	t.Helper()
	for i := range users {
		u := user(i)
		check(t, j.count.Put(u, int64(i)))
		check(t, j.name.Put(int64(i-users/2), u))
		check(t, j.profile.Put(u, Profile{Name: u, Age: int32(20 + i%50), Score: float64(i) / 4, Since: time.Unix(1_700_000_000+int64(i), 5).UTC()}))
		check(t, j.total.Add(u, int64(i)))
		check(t, j.total.Add(u, 1))
		check(t, j.visits.Put(u, int64(i*2)))
		_, err := j.timers.RegisterEventTime(u, int64(1000+i%7))
		check(t, err)
		if i%3 == 0 {
			check(t, j.tags.Add(u, "a"))
			check(t, j.tags.Add(u, "b-"+u))
		}
		if i%5 == 0 {
			check(t, j.seen.Put(u, "/home", int64(i)))
			check(t, j.seen.Put(u, "/about", 1))
			_, err := j.timers.RegisterProcessingTime(u, int64(now+i))
			check(t, err)
		}
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// savepointOf writes b's savepoint.
func savepointOf(t *testing.T, b *cowstate.Backend) []byte {
	t.Helper()
	snap := b.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	check(t, cowstate.WriteSavepoint(context.Background(), &buf, snap, nil))
	return buf.Bytes()
}

func open(t *testing.T, b []byte) *savepoint.File {
	t.Helper()
	f, err := savepoint.Open(bytes.NewReader(b), int64(len(b)))
	check(t, err)
	return f
}

// restore restores the savepoint file into b.
func restore(t *testing.T, b *cowstate.Backend, file []byte) {
	t.Helper()
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	check(t, err)
	check(t, b.RestoreSnapshot(context.Background(), r))
}

func testSavepoint(t *testing.T) []byte {
	j := newJob(t, 128)
	j.fill(t)
	return savepointOf(t, j.b)
}

func TestListCountsEveryStateAndTimerService(t *testing.T) {
	f := open(t, testSavepoint(t))
	l, err := f.List(context.Background())
	check(t, err)
	if !l.Savepoint || l.MaxParallelism != 128 || l.KeyGroups != statetable.AllKeyGroups(128) {
		t.Errorf("listing %+v", l)
	}
	profileID := "struct{Name string;Age int32;Score float64;Since time}"
	want := []savepoint.StateSummary{
		{Name: "count", Kind: statetable.KindValue, Codecs: []string{"string", "void", "int64/be-signflip"}, Entries: users},
		{Name: "name", Kind: statetable.KindValue, Codecs: []string{"int64/be-signflip", "void", "string"}, Entries: users},
		{Name: "profile", Kind: statetable.KindValue, Codecs: []string{"string", "void", profileID}, Entries: users},
		{Name: "seen", Kind: statetable.KindMap, Codecs: []string{"string", "void", "string", "int64/be-signflip"}, Entries: users / 5},
		{Name: "tags", Kind: statetable.KindList, Codecs: []string{"string", "void", "string"}, Entries: users / 3},
		{Name: "total", Kind: statetable.KindReducing, Codecs: []string{"string", "void", "int64/be-signflip"}, Entries: users},
		{Name: "visits", Kind: statetable.KindValue, Codecs: []string{"string", "void", "int64/be-signflip"}, TTL: true, Entries: users},
	}
	if fmt.Sprint(l.States) != fmt.Sprint(want) {
		t.Errorf("states\n%v\nwant\n%v", l.States, want)
	}
	wantT := []savepoint.TimerSummary{{Name: "t", Codecs: [2]string{"string", "void"}, EventTime: users, ProcessingTime: users / 5}}
	if fmt.Sprint(l.Timers) != fmt.Sprint(wantT) {
		t.Errorf("timers %v, want %v", l.Timers, wantT)
	}
}

// dumpLines dumps f with sel and returns its lines, each decoded.
func dumpLines(t *testing.T, f *savepoint.File, sel savepoint.Select) (string, []map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	check(t, f.Dump(context.Background(), &buf, sel))
	var lines []map[string]any
	for l := range strings.SplitSeq(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("dump line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return buf.String(), lines
}

func TestDumpDecodesBuiltInAndStructCodecs(t *testing.T) {
	f := open(t, testSavepoint(t))
	out, lines := dumpLines(t, f, savepoint.Select{})
	if n := len(lines); n != 1+users*5+users/3+users/5+users+users/5 {
		t.Errorf("%d lines", n)
	}
	for _, want := range []string{
		`{"max_parallelism":128,"states":[{"name":"count","kind":"value","codecs":["string","void","int64/be-signflip"]},`,
		`{"name":"visits","kind":"value","codecs":["string","void","int64/be-signflip"],"ttl":true}],"timers":[{"name":"t","codecs":["string","void"]}]}` + "\n",
		`"key":"user-007","ns":null,"value":7}`,
		`"key":-143,"ns":null,"value":"user-007"}`,
		`"key":"user-007","ns":null,"value":{"Name":"user-007","Age":27,"Score":1.75,"Since":"2023-11-14T22:13:27.000000005Z"}}`,
		`"key":"user-006","ns":null,"list":[{"value":"a"},{"value":"b-user-006"}]}`,
		`"key":"user-005","ns":null,"value":10,"expires":` + strconv.Itoa(now+3600_000) + `}`,
		`"key":"user-005","ns":null,"value":6}`,
		`"domain":"event","kg":`,
		`"ts":1000,"key":"user-007","ns":null}`,
		`{"timers":"t","domain":"processing","kg":`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %s", want)
		}
	}
	// A map's entries in the hash order of their user keys, both there.
	if !regexp.MustCompile(`"key":"user-005","ns":null,"map":\[\{"key":"/(home|about)","value":(5|1)\},\{"key":"/(home|about)","value":(5|1)\}\]`).MatchString(out) {
		t.Errorf("no map line of user-005")
	}
	// Key groups ascend, and each is the key's.
	last := -1
	for _, l := range lines[1:] {
		kg := int(l["kg"].(float64))
		if kg < last {
			t.Fatalf("key group %d after %d", kg, last)
		}
		last = kg
	}
}

func TestDumpShowsOtherCodecsAsBase64(t *testing.T) {
	b := newBackend(t, 16)
	acc := statetable.FuncCodec("test.pair/v1", func(dst []byte, v [2]int32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(dst, uint32(v[0])), uint32(v[1]))
	}, func(src []byte) ([2]int32, error) {
		if len(src) != 8 {
			return [2]int32{}, statetable.ErrDecode
		}
		return [2]int32{int32(binary.BigEndian.Uint32(src)), int32(binary.BigEndian.Uint32(src[4:]))}, nil
	})
	s, err := cowstate.Value[string, [2]int32](b, "pair", cowstate.WithValueCodec(acc))
	check(t, err)
	check(t, s.Put("k", [2]int32{1, 2}))
	out, _ := dumpLines(t, open(t, savepointOf(t, b)), savepoint.Select{})
	if want := `"key":"k","ns":null,"value":{"codec":"test.pair/v1","base64":"AAAAAQAAAAI="}}`; !strings.Contains(out, want) {
		t.Errorf("dump:\n%s\nlacks %s", out, want)
	}
}

func TestEntriesSelectKeyGroupsAndKeys(t *testing.T) {
	f := open(t, testSavepoint(t))
	ctx := context.Background()
	kgs := statetable.KeyGroupRange{First: 10, Last: 19}
	var got []string
	for e, err := range f.Entries(ctx, savepoint.Select{States: []string{"count"}, KeyGroups: &kgs}) {
		check(t, err)
		if e.State != "count" || !kgs.Contains(e.KeyGroup) || e.KeyGroup != statetable.KeyGroupOfKey(e.Key, 128) {
			t.Fatalf("entry %+v", e)
		}
		got = append(got, string(e.Key))
	}
	var want []string
	for i := range users {
		if kgs.Contains(statetable.KeyGroupOfKey([]byte(user(i)), 128)) {
			want = append(want, user(i))
		}
	}
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("count in key groups %v: %v, want %v", kgs, got, want)
	}
	// A key range: user-100 <= key < user-110.
	got = nil
	for e, err := range f.Entries(ctx, savepoint.Select{States: []string{"total"}, KeyFrom: []byte(user(100)), KeyTo: []byte(user(110))}) {
		check(t, err)
		got = append(got, string(e.Key))
	}
	slices.Sort(got)
	if len(got) != 10 || got[0] != user(100) || got[9] != user(109) {
		t.Errorf("total of user-100 to user-109: %v", got)
	}
	// Timers, and breaking off a loop.
	n := 0
	for tm, err := range f.Timers(ctx, savepoint.Select{Timers: []string{"t"}}) {
		check(t, err)
		if tm.Domain != timerqueue.EventTime && tm.Domain != timerqueue.ProcessingTime {
			t.Fatalf("timer %+v", tm)
		}
		if n++; n == 5 {
			break
		}
	}
	if n != 5 {
		t.Errorf("%d timers before the break", n)
	}
	for _, err := range f.Entries(ctx, savepoint.Select{States: []string{"nope"}}) {
		if !errors.Is(err, statetable.ErrUnknownState) || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("unknown state: %v", err)
		}
	}
}
