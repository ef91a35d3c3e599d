package savepoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/snapshot"
)

// schemaOf is the schema of b's job, through its JSON form, as a deploy
// tool reads it.
func schemaOf(t *testing.T, b *cowstate.Backend) savepoint.Header {
	t.Helper()
	snap := b.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	check(t, savepoint.WriteSchema(&buf, savepoint.HeaderOf(cowstate.SavepointMeta(snap))))
	return must(savepoint.ReadSchema(&buf))(t)
}

func verdicts(checks []cowstate.RestoreCheck) string {
	var out []string
	for _, c := range checks {
		out = append(out, fmt.Sprintf("%s:%v", c.Name, c.Verdict))
	}
	return strings.Join(out, " ")
}

// Check judges a savepoint against a job's schema from codec IDs alone,
// and says what the job's own CheckRestore says: the next release's
// struct migrates, a changed value type or key type is refused naming
// it, a state the job dropped must be dropped.
func TestCheckAgreesWithTheJobsCheckRestore(t *testing.T) {
	file := open(t, testSavepoint(t)).Meta()
	type register func(b *cowstate.Backend) error
	// The test job's registrations, by name.
	job := map[string]register{
		"count":   func(b *cowstate.Backend) error { _, err := cowstate.Value[string, int64](b, "count"); return err },
		"name":    func(b *cowstate.Backend) error { _, err := cowstate.Value[int64, string](b, "name"); return err },
		"profile": func(b *cowstate.Backend) error { _, err := cowstate.Value[string, Profile](b, "profile"); return err },
		"seen":    func(b *cowstate.Backend) error { _, err := cowstate.Map[string, string, int64](b, "seen"); return err },
		"tags":    func(b *cowstate.Backend) error { _, err := cowstate.List[string, string](b, "tags"); return err },
		"total": func(b *cowstate.Backend) error {
			_, err := cowstate.Reducing[string](b, "total", func(a, b int64) int64 { return a + b })
			return err
		},
		"visits": func(b *cowstate.Backend) error {
			_, err := cowstate.ValueWithTTL[string, int64](b, "visits", cowstate.TTL{Duration: time.Hour})
			return err
		},
		"t": func(b *cowstate.Backend) error { _, err := cowstate.Timers[string](b, "t"); return err },
	}
	for _, c := range []struct {
		name string
		// changed replaces the job's registration of a name (nil: the
		// next release does not register it).
		changed map[string]register
		opts    savepoint.CheckOptions
		want    string
		says    []string
	}{
		{name: "the same job", want: "count:restores name:restores profile:restores seen:restores tags:restores total:restores visits:restores t:restores"},
		{name: "profile evolved", changed: map[string]register{"profile": func(b *cowstate.Backend) error {
			_, err := cowstate.Value[string, ProfileV2](b, "profile")
			return err
		}}, want: "count:restores name:restores profile:migrates seen:restores tags:restores total:restores visits:restores t:restores"},
		{name: "count is text now", changed: map[string]register{"count": func(b *cowstate.Backend) error {
			_, err := cowstate.Value[string, string](b, "count")
			return err
		}}, want: "count:refused", says: []string{`"count"`, "int64/be-signflip", "only the job can tell"}},
		{name: "name keyed by string", changed: map[string]register{"name": func(b *cowstate.Backend) error {
			_, err := cowstate.Value[string, string](b, "name")
			return err
		}}, want: "name:refused", says: []string{`"name"`, "key codec", "never migrate"}},
		{name: "visits without TTL", changed: map[string]register{"visits": func(b *cowstate.Backend) error {
			_, err := cowstate.Value[string, int64](b, "visits")
			return err
		}}, want: "visits:refused", says: []string{`"visits"`, "TTL"}},
		{name: "tags dropped and t renamed", changed: map[string]register{"tags": nil, "t": func(b *cowstate.Backend) error {
			_, err := cowstate.Timers[string](b, "timers")
			return err
		}}, opts: savepoint.CheckOptions{Drop: []string{"tags"}, Rename: map[string]string{"t": "timers"}},
			want: "count:restores name:restores profile:restores seen:restores tags:dropped total:restores visits:restores t:restores"},
		{name: "tags no longer registered", changed: map[string]register{"tags": nil}, want: "tags:refused", says: []string{`"tags"`, "DropOnRestore"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t, 128)
			for name, reg := range job {
				if ch, ok := c.changed[name]; ok {
					reg = ch
				}
				if reg != nil {
					check(t, reg(b))
				}
			}
			got := must(savepoint.Check(file, schemaOf(t, b), c.opts))(t)
			for name, as := range c.opts.Rename {
				check(t, b.RestoreAs(name, as))
			}
			for _, d := range c.opts.Drop {
				check(t, b.DropOnRestore(d))
			}
			inJob := must(b.CheckRestore(file))(t)
			if g, j := verdicts(got), verdicts(inJob); g != j {
				t.Errorf("Check: %s\nthe job's CheckRestore: %s", g, j)
			}
			if !strings.Contains(verdicts(got), c.want) {
				t.Errorf("Check: %s, want %s", verdicts(got), c.want)
			}
			for _, r := range got {
				if r.Verdict != cowstate.Refused {
					continue
				}
				if !errors.Is(r.Err, snapshot.ErrMismatch) {
					t.Errorf("%s: %v, want ErrMismatch", r.Name, r.Err)
				}
				for _, s := range c.says {
					if !strings.Contains(r.Err.Error(), s) {
						t.Errorf("%s: %v, want it to say %s", r.Name, r.Err, s)
					}
				}
			}
		})
	}
	if _, err := savepoint.Check(file, savepoint.Header{MaxParallelism: 64}, savepoint.CheckOptions{}); !errors.Is(err, snapshot.ErrMismatch) {
		t.Errorf("another max parallelism: %v", err)
	}
}

// CheckOptions.Reads judges value codecs that are not both Struct schemas
// (protocodec.Reads for protocol buffer messages): what it accepts
// migrates, what it refuses is refused with its reason.
func TestCheckReadsJudgesOtherCodecs(t *testing.T) {
	file := open(t, testSavepoint(t)).Meta()
	b := newBackend(t, 128)
	_, err := cowstate.Value[string, string](b, "count") // int64 in the savepoint
	check(t, err)
	job := schemaOf(t, b)
	errNarrow := errors.New("the job's judge refuses it")
	for _, c := range []struct {
		reads func(cur, old string) error
		want  string
	}{
		{func(cur, old string) error { return nil }, "count:migrates"},
		{func(cur, old string) error { return errNarrow }, "count:refused"},
	} {
		var asked []string
		reads := func(cur, old string) error {
			asked = append(asked, old+" -> "+cur)
			return c.reads(cur, old)
		}
		got := must(savepoint.Check(file, job, savepoint.CheckOptions{Reads: reads}))(t)
		if v := verdicts(got); !strings.Contains(v, c.want) {
			t.Errorf("Check: %s, want %s", v, c.want)
		}
		if len(asked) != 1 || !strings.Contains(asked[0], "int64") {
			t.Errorf("Reads asked %q, want once, for the count's value codecs", asked)
		}
		for _, r := range got {
			if r.Name == "count" && r.Verdict == cowstate.Refused && (!errors.Is(r.Err, errNarrow) || !errors.Is(r.Err, snapshot.ErrMismatch)) {
				t.Errorf("count refused with %v, want ErrMismatch wrapping the judge's error", r.Err)
			}
		}
	}
}
