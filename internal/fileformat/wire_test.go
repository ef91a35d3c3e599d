package fileformat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

var errTest = errors.New("corrupt")

func TestDecoder_NeverTrustsLengths(t *testing.T) {
	b := binary.AppendUvarint(nil, 1<<60) // a blob "of 2^60 bytes"
	b = append(b, "abc"...)
	d := Decoder{B: b, What: "test", Corrupt: errTest}
	if got := d.Bytes(); got != nil || !errors.Is(d.Err, errTest) {
		t.Fatalf("huge length: %q, %v", got, d.Err)
	}
	if d.Byte() != 0 || d.U64() != 0 || d.Uvarint() != 0 {
		t.Fatal("reads after an error return zero values")
	}
	d = Decoder{B: binary.AppendUvarint(nil, 7), What: "test", Corrupt: errTest}
	if d.Count(7); d.Err == nil {
		t.Fatal("count 7 with limit 7 accepted")
	}
	d = Decoder{B: AppendString(AppendBytes(nil, []byte{1, 2}), "xy"), Corrupt: errTest}
	if got, s := d.Bytes(), d.String(); !bytes.Equal(got, []byte{1, 2}) || s != "xy" || d.Left() != 0 || d.Err != nil {
		t.Fatalf("round trip: %v %q %v", got, s, d.Err)
	}
}

// file builds header + sections + index + footer as the formats do.
func file(header []byte, groups []int, sections [][]byte) []byte {
	out := bytes.Clone(header)
	var index []byte
	index = binary.AppendUvarint(index, uint64(len(groups)))
	for i, g := range groups {
		index = AppendSection(index, Section{Group: g, Off: int64(len(out)), Length: int64(len(sections[i])), Sum: xxhash.Sum64(sections[i])})
		out = append(out, sections[i]...)
	}
	off := int64(len(out))
	out = append(out, index...)
	return AppendFooter(out, off, index, "TESTEND!")
}

func TestReadIndex(t *testing.T) {
	header := []byte("HEADER")
	good := file(header, []int{1, 3}, [][]byte{[]byte("aa"), []byte("bbb")})
	idx, err := ReadIndex(bytes.NewReader(good), int64(len(good)), int64(len(header)), "TESTEND!", 0, 7, errTest)
	if err != nil || len(idx) != 2 || idx[1].Group != 3 || idx[1].Off != 8 || idx[1].Length != 3 {
		t.Fatalf("good file: %+v, %v", idx, err)
	}
	for name, f := range map[string][]byte{
		"groups out of order":  file(header, []int{3, 1}, [][]byte{[]byte("aa"), []byte("bbb")}),
		"group past the range": file(header, []int{1, 9}, [][]byte{[]byte("aa"), []byte("bbb")}),
		"truncated":            good[:len(good)-1],
		"empty":                nil,
	} {
		if _, err := ReadIndex(bytes.NewReader(f), int64(len(f)), int64(len(header)), "TESTEND!", 0, 7, errTest); !errors.Is(err, errTest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ReadAt(bytes.NewReader(good), 4, 1<<62, int64(len(good)), errTest); !errors.Is(err, errTest) {
		t.Fatalf("read past the end: %v", err)
	}
	if b, err := ReadSection(bytes.NewReader(good), int64(len(good)), idx[1], "section", errTest); err != nil || string(b) != "bbb" {
		t.Fatalf("section: %q, %v", b, err)
	}
	for name, s := range map[string]Section{
		"bad checksum":    {Group: 3, Off: 8, Length: 3, Sum: idx[1].Sum + 1},
		"past the end":    {Group: 3, Off: 8, Length: 1 << 62, Sum: idx[1].Sum},
		"negative offset": {Group: 3, Off: -1, Length: 3, Sum: idx[1].Sum},
	} {
		if _, err := ReadSection(bytes.NewReader(good), int64(len(good)), s, "section", errTest); !errors.Is(err, errTest) {
			t.Errorf("section, %s: %v", name, err)
		}
	}
}

func TestHeaderRead(t *testing.T) {
	const magic = "TESTHEAD"
	header := func(sumHeader bool, extra string, meta string) []byte {
		b := append([]byte(magic), 0, 1)
		b = append(b, extra...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(meta)))
		b = append(b, meta...)
		if sumHeader {
			return binary.BigEndian.AppendUint64(b, xxhash.Sum64(b))
		}
		return binary.BigEndian.AppendUint64(b, xxhash.Sum64String(meta))
	}
	for _, sumHeader := range []bool{false, true} {
		h := Header{Name: "test", Magic: magic, Version: 1, Extra: 3, SumHeader: sumHeader, Corrupt: errTest}
		good := file(header(sumHeader, "xyz", "meta"), []int{1}, [][]byte{[]byte("a")})
		_, extra, meta, end, err := h.Read(bytes.NewReader(good), int64(len(good)))
		if err != nil || string(extra) != "xyz" || string(meta) != "meta" || end != int64(len(magic)+2+3+4+4+8) {
			t.Fatalf("SumHeader %v: good header: %q %q %d %v", sumHeader, extra, meta, end, err)
		}
		for n := range end + FooterSize { // too short for the header and a footer
			if _, _, _, _, err := h.Read(bytes.NewReader(good[:n]), n); !errors.Is(err, errTest) {
				t.Fatalf("SumHeader %v: truncated to %d bytes: %v", sumHeader, n, err)
			}
		}
		for i := range int(end) {
			b := bytes.Clone(good)
			b[i] ^= 0x10
			if _, _, _, _, err := h.Read(bytes.NewReader(b), int64(len(b))); err == nil && (sumHeader || i >= len(magic)+2+3) {
				t.Fatalf("SumHeader %v: bit flip at %d not detected", sumHeader, i)
			}
		}
		huge := bytes.Clone(good)
		binary.BigEndian.PutUint32(huge[len(magic)+2+3:], 1<<31)
		if _, _, _, _, err := h.Read(bytes.NewReader(huge), int64(len(huge))); !errors.Is(err, errTest) {
			t.Fatalf("SumHeader %v: huge metadata length: %v", sumHeader, err)
		}
		// A reader of versions 1 to 2 reads a version-1 file as such, and
		// refuses versions 0 and 3 (only the header checksum covers the
		// version: change it with SumHeader off).
		if !sumHeader {
			h2 := h
			h2.MinVersion, h2.Version = 1, 2
			if v, _, _, _, err := h2.Read(bytes.NewReader(good), int64(len(good))); err != nil || v != 1 {
				t.Fatalf("version range 1-2, file of version 1: version %d, %v", v, err)
			}
			for _, v := range []uint16{0, 3} {
				b := bytes.Clone(good)
				binary.BigEndian.PutUint16(b[len(magic):], v)
				if _, _, _, _, err := h2.Read(bytes.NewReader(b), int64(len(b))); !errors.Is(err, errTest) || !strings.Contains(err.Error(), "want 1 to 2") {
					t.Fatalf("version range 1-2, file of version %d: %v", v, err)
				}
			}
		}
	}
}

func TestRecords(t *testing.T) {
	type rec struct{ tag, pos, dom, n int }
	read := func(b []byte) ([]rec, error) {
		var got []rec
		d := Decoder{B: b, What: "test", Corrupt: errTest}
		err := d.Records(2, 1, 3, func(i, n int) error {
			got = append(got, rec{TagState, i, 0, n})
			d.Off += n * 2 // entries of 2 bytes
			return nil
		}, func(j int, dom byte, n int) error {
			got = append(got, rec{TagTimers, j, int(dom), n})
			d.Off += n * 3 // timers of 3 bytes
			return nil
		})
		return got, err
	}
	good := []byte{TagState, 1, 2, 'a', 'b', 'c', 'd', TagTimers, 0, 1, 1, 'x', 'y', 'z', TagEnd}
	if got, err := read(good); err != nil || len(got) != 2 || got[0] != (rec{TagState, 1, 0, 2}) || got[1] != (rec{TagTimers, 0, 1, 1}) {
		t.Fatalf("good section: %v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"empty":                {},
		"no end tag":           good[:len(good)-1],
		"after the end tag":    append(bytes.Clone(good), 0),
		"unknown tag":          {3, TagEnd},
		"state out of range":   {TagState, 2, 0, TagEnd},
		"service out of range": {TagTimers, 1, 0, 0, TagEnd},
		"time domain":          {TagTimers, 0, 2, 0, TagEnd},
		"count past the end":   {TagState, 0, 9, 'a', 'b', TagEnd},
	} {
		if _, err := read(b); !errors.Is(err, errTest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	d := Decoder{B: []byte{TagState, 0, 0, TagEnd}, Corrupt: errTest}
	if err := d.Records(1, 0, 3, func(int, int) error { return errors.ErrUnsupported }, nil); err != errors.ErrUnsupported {
		t.Fatalf("callback error: %v", err)
	}
}
