package protocodec_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contrib/protocodec"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

func mustMessage[T proto.Message](t *testing.T) statetable.Evolving[T] {
	t.Helper()
	c, err := protocodec.Message[T]()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMessage_Interface: an interface type names no message.
func TestMessage_Interface(t *testing.T) {
	if _, err := protocodec.Message[proto.Message](); !errors.Is(err, statetable.ErrNoCodec) {
		t.Fatalf("Message[proto.Message]: %v, want ErrNoCodec", err)
	}
}

// TestMessage_RoundTrip: a generated message encodes deterministically and
// decodes to an equal message; the ID is its schema.
func TestMessage_RoundTrip(t *testing.T) {
	c := mustMessage[*wrapperspb.Int64Value](t)
	if want := "protobuf google.protobuf.Int64Value{1 value int64}"; c.ID() != want {
		t.Fatalf("ID %q, want %q", c.ID(), want)
	}
	b := c.Append([]byte("x"), wrapperspb.Int64(-7))
	if b[0] != 'x' {
		t.Fatalf("Append overwrote dst: %q", b)
	}
	v, err := c.Decode(b[1:])
	if err != nil || v.GetValue() != -7 {
		t.Fatalf("Decode: %v, %v", v, err)
	}
	if _, err := c.Decode([]byte{0xff}); !errors.Is(err, statetable.ErrDecode) {
		t.Fatalf("Decode of garbage: %v, want ErrDecode", err)
	}
}

// TestMessage_Evolution: protobuf's wire-compatible changes that keep
// every value read, refused where the parser would truncate or misread.
func TestMessage_Evolution(t *testing.T) {
	i32, i64 := mustMessage[*wrapperspb.Int32Value](t), mustMessage[*wrapperspb.Int64Value](t)
	u32, u64 := mustMessage[*wrapperspb.UInt32Value](t), mustMessage[*wrapperspb.UInt64Value](t)
	str, byt := mustMessage[*wrapperspb.StringValue](t), mustMessage[*wrapperspb.BytesValue](t)
	f32, f64 := mustMessage[*wrapperspb.FloatValue](t), mustMessage[*wrapperspb.DoubleValue](t)

	// int32 -> int64 keeps negative values.
	d, err := i64.DecoderFor(i32.ID())
	if err != nil {
		t.Fatal(err)
	}
	if v, err := d(i32.Append(nil, wrapperspb.Int32(-5))); err != nil || v.GetValue() != -5 {
		t.Fatalf("int32 -5 read as int64: %v, %v", v, err)
	}
	// uint32 -> uint64, string -> bytes.
	if d, err := u64.DecoderFor(u32.ID()); err != nil {
		t.Fatal(err)
	} else if v, err := d(u32.Append(nil, wrapperspb.UInt32(1<<31))); err != nil || v.GetValue() != 1<<31 {
		t.Fatalf("uint32 read as uint64: %v, %v", v, err)
	}
	if d, err := byt.DecoderFor(str.ID()); err != nil {
		t.Fatal(err)
	} else if v, err := d(str.Append(nil, wrapperspb.String("héllo"))); err != nil || string(v.GetValue()) != "héllo" {
		t.Fatalf("string read as bytes: %v, %v", v, err)
	}
	for _, c := range []struct {
		name     string
		cur, old interface {
			ID() string
		}
		dec func(string) error
	}{
		{"int64 -> int32", i32, i64, func(id string) error { _, err := i32.DecoderFor(id); return err }},
		{"uint64 -> uint32", u32, u64, func(id string) error { _, err := u32.DecoderFor(id); return err }},
		{"float -> double", f64, f32, func(id string) error { _, err := f64.DecoderFor(id); return err }},
		{"bytes -> string", str, byt, func(id string) error { _, err := str.DecoderFor(id); return err }},
		{"int32 -> string", str, i32, func(id string) error { _, err := str.DecoderFor(id); return err }},
	} {
		err := c.dec(c.old.ID())
		if !errors.Is(err, statetable.ErrIncompatible) || !strings.Contains(err.Error(), "field 1 (value)") {
			t.Errorf("%s: %v, want ErrIncompatible naming field 1 (value)", c.name, err)
		}
		if err2 := protocodec.Reads(c.cur.ID(), c.old.ID()); !errors.Is(err2, statetable.ErrIncompatible) {
			t.Errorf("%s: Reads: %v, want ErrIncompatible as DecoderFor", c.name, err2)
		}
	}
	if err := protocodec.Reads(i64.ID(), i32.ID()); err != nil {
		t.Errorf("Reads int64 of int32: %v", err)
	}
	if _, err := i64.DecoderFor("int64"); !errors.Is(err, statetable.ErrIncompatible) {
		t.Errorf("DecoderFor of another codec: %v, want ErrIncompatible", err)
	}
	if _, err := i64.DecoderFor("protobuf x{1 a int64"); !errors.Is(err, statetable.ErrIncompatible) {
		t.Errorf("DecoderFor of a damaged ID: %v, want ErrIncompatible", err)
	}
}

// order returns the dynamic message type shop.Order of one version of a
// schema: fields given as descriptor protos, with a nested message
// shop.Item (fields item) and an enum shop.State.
func order(t *testing.T, fields []*descriptorpb.FieldDescriptorProto, item []*descriptorpb.FieldDescriptorProto) protoreflect.MessageType {
	t.Helper()
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("shop.proto"),
		Package: proto.String("shop"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Order"), Field: fields, NestedType: []*descriptorpb.DescriptorProto{{
				Name:    proto.String("PricesEntry"),
				Field:   []*descriptorpb.FieldDescriptorProto{scalar("key", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING), scalar("value", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64)},
				Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			}}},
			{Name: proto.String("Item"), Field: item},
		},
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("State"), Value: []*descriptorpb.EnumValueDescriptorProto{
			{Name: proto.String("NEW"), Number: proto.Int32(0)}, {Name: proto.String("PAID"), Number: proto.Int32(1)},
		}}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dynamicpb.NewMessageType(f.Messages().ByName("Order"))
}

func scalar(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
	return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}
}

func repeated(f *descriptorpb.FieldDescriptorProto) *descriptorpb.FieldDescriptorProto {
	f.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	return f
}

func typed(f *descriptorpb.FieldDescriptorProto, typeName string) *descriptorpb.FieldDescriptorProto {
	f.TypeName = proto.String(typeName)
	return f
}

const (
	tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
	tInt32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
	tInt64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
	tMessage = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	tEnum    = descriptorpb.FieldDescriptorProto_TYPE_ENUM
)

// v1 of shop.Order: id, items (shop.Item{sku, count int32}), prices, state.
func orderV1(t *testing.T) protoreflect.MessageType {
	return order(t, []*descriptorpb.FieldDescriptorProto{
		scalar("id", 1, tString),
		repeated(typed(scalar("items", 2, tMessage), ".shop.Item")),
		repeated(typed(scalar("prices", 3, tMessage), ".shop.Order.PricesEntry")),
		typed(scalar("state", 4, tEnum), ".shop.State"),
		scalar("note", 5, tString),
	}, []*descriptorpb.FieldDescriptorProto{scalar("sku", 1, tString), scalar("count", 2, tInt32)})
}

func newOrder(mt protoreflect.MessageType, id string, count int64) proto.Message {
	m := mt.New()
	fs := mt.Descriptor().Fields()
	m.Set(fs.ByName("id"), protoreflect.ValueOfString(id))
	items := m.Mutable(fs.ByName("items")).List()
	item := items.NewElement().Message()
	ifs := item.Descriptor().Fields()
	item.Set(ifs.ByName("sku"), protoreflect.ValueOfString("sku-"+id))
	if ifs.ByName("count").Kind() == protoreflect.Int32Kind {
		item.Set(ifs.ByName("count"), protoreflect.ValueOfInt32(int32(count)))
	} else {
		item.Set(ifs.ByName("count"), protoreflect.ValueOfInt64(count))
	}
	items.Append(protoreflect.ValueOfMessage(item))
	m.Mutable(fs.ByName("prices")).Map().Set(protoreflect.ValueOfString("eur").MapKey(), protoreflect.ValueOfInt64(count*100))
	if f := fs.ByName("state"); f != nil {
		m.Set(f, protoreflect.ValueOfEnum(1))
	}
	if f := fs.ByName("note"); f != nil {
		m.Set(f, protoreflect.ValueOfString("dropped later"))
	}
	return m.Interface()
}

// TestDynamic_ID: nested messages, maps, enums and repeated fields are
// described in the ID, and a recursive type has a finite one.
func TestDynamic_ID(t *testing.T) {
	c := protocodec.Dynamic(orderV1(t))
	want := "protobuf shop.Order{1 id string;2 items repeated message shop.Item{1 sku string;2 count int32};3 prices map<string,int64>;4 state enum shop.State;5 note string}"
	if c.ID() != want {
		t.Fatalf("ID\n%s\nwant\n%s", c.ID(), want)
	}
	tree := order(t, []*descriptorpb.FieldDescriptorProto{
		scalar("id", 1, tString),
		repeated(typed(scalar("children", 2, tMessage), ".shop.Order")),
	}, nil)
	rc := protocodec.Dynamic(tree)
	if want := "protobuf shop.Order{1 id string;2 children repeated message shop.Order}"; rc.ID() != want {
		t.Fatalf("recursive ID %q, want %q", rc.ID(), want)
	}
	if err := protocodec.Reads(rc.ID(), rc.ID()+"x"); !errors.Is(err, statetable.ErrIncompatible) {
		t.Fatalf("Reads of a damaged ID: %v", err)
	}
}

// TestState_UpgradeAcrossSnapshot: a job's state of shop.Order messages
// restores into the next version of the type (a field removed, a nested
// integer widened, a field added, one renamed), every value migrated; a
// version that narrows a field is refused before anything is restored,
// naming the field.
func TestState_UpgradeAcrossSnapshot(t *testing.T) {
	v1 := orderV1(t)
	data := func() []byte {
		b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
		s, err := cowstate.Value[string, proto.Message](b, "orders", cowstate.WithValueCodec(protocodec.Dynamic(v1)))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "c"} {
			if err := s.Put(id, newOrder(v1, id, int64(len(id)+40))); err != nil {
				t.Fatal(err)
			}
		}
		snap := b.Snapshot()
		defer snap.Release()
		var buf bytes.Buffer
		if err := cowstate.WriteSnapshot(context.Background(), &buf, snap, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}()
	restore := func(mt protoreflect.MessageType) (*cowstate.ValueState[string, proto.Message], error) {
		b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
		s, err := cowstate.Value[string, proto.Message](b, "orders", cowstate.WithValueCodec(protocodec.Dynamic(mt)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := snapshot.Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		return s, b.RestoreSnapshot(context.Background(), r)
	}

	v2 := order(t, []*descriptorpb.FieldDescriptorProto{
		scalar("order_id", 1, tString), // renamed
		repeated(typed(scalar("items", 2, tMessage), ".shop.Item")),
		repeated(typed(scalar("prices", 3, tMessage), ".shop.Order.PricesEntry")),
		scalar("state", 4, tInt32),     // an enum read as its number
		scalar("customer", 6, tString), // added; note (5) removed
	}, []*descriptorpb.FieldDescriptorProto{scalar("sku", 1, tString), scalar("count", 2, tInt64)}) // count widened
	s, err := restore(v2)
	if err != nil {
		t.Fatalf("restore into v2: %v", err)
	}
	for _, id := range []string{"a", "b", "c"} {
		m, err := s.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		r := m.ProtoReflect()
		fs := r.Descriptor().Fields()
		item := r.Get(fs.ByName("items")).List().Get(0).Message()
		if got := r.Get(fs.ByName("order_id")).String(); got != id {
			t.Errorf("%s: order_id %q", id, got)
		}
		if got := item.Get(item.Descriptor().Fields().ByName("count")).Int(); got != int64(len(id)+40) {
			t.Errorf("%s: items[0].count %d, want %d", id, got, len(id)+40)
		}
		if got := r.Get(fs.ByName("prices")).Map().Get(protoreflect.ValueOfString("eur").MapKey()).Int(); got != int64(len(id)+40)*100 {
			t.Errorf("%s: prices[eur] %d", id, got)
		}
		if got := r.Get(fs.ByName("state")).Int(); got != 1 {
			t.Errorf("%s: state %d, want 1", id, got)
		}
		if r.Has(fs.ByName("customer")) || len(r.GetUnknown()) != 0 {
			t.Errorf("%s: customer set or unknown bytes kept (%d): the removed note must be dropped", id, len(r.GetUnknown()))
		}
	}

	narrowed := order(t, []*descriptorpb.FieldDescriptorProto{
		scalar("id", 1, tString),
		repeated(typed(scalar("items", 2, tMessage), ".shop.Item")),
	}, []*descriptorpb.FieldDescriptorProto{scalar("sku", 1, tString), scalar("count", 2, tString)})
	s, err = restore(narrowed)
	if !errors.Is(err, statetable.ErrIncompatible) || !strings.Contains(err.Error(), "field 2 (count)") {
		t.Fatalf("restore into a type whose item count is a string: %v, want ErrIncompatible naming field 2 (count)", err)
	}
	if s.Count() != 0 {
		t.Fatalf("a refused restore left %d values", s.Count())
	}
}

// FuzzReads: any pair of IDs is judged with an error or nil, never a
// panic, and an ID reads itself.
func FuzzReads(f *testing.F) {
	f.Add("protobuf shop.Order{1 id string;2 items repeated message shop.Item{1 sku string;2 count int32};3 prices map<string,int64>;4 state enum shop.State}", "protobuf shop.Order{1 id string}")
	f.Add("protobuf a{1 b message a}", "protobuf a{1 b message c{1 d message a}}")
	f.Add("protobuf "+strings.Repeat("a{1 b message ", 200), "protobuf x{}")
	f.Add("protobuf x{1 a map<string,message y{1 b group z{}}>}", "protobuf x{1 a bytes}")
	f.Fuzz(func(t *testing.T, cur, old string) {
		protocodec.Reads(cur, old)
		if err := protocodec.Reads(cur, cur); err != nil {
			t.Fatalf("an ID does not read itself: %v", err)
		}
	})
}
