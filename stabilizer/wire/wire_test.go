package wire

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer/core"
)

func sample() core.Message {
	s := core.StreamID{Origin: "us-east-1", Name: "kv"}
	return core.Message{
		Type: core.MsgData, From: "us-east-1", To: "eu-west-1", Session: 1 << 60, Version: core.ProtocolVersion, Schema: 0xfeedface,
		Entries: []core.Entry{
			{Stream: s, Seq: 1, HLC: core.HLC{Wall: 1700000000000000000, Logical: 3}, Payload: []byte("job/7 running")},
			{Stream: s, Seq: 2, HLC: core.HLC{Wall: -5, Logical: 0}, Payload: []byte{}},
		},
		Positions: []core.Position{{Stream: s, Seq: 9, HLC: core.HLC{Wall: 4}}},
		Clock:     core.HLC{Wall: 77, Logical: 1},
		Heads:     []core.Position{{Stream: s, Seq: 12}},
		Cells:     []core.AckCell{{Stream: s, Site: "eu-west-1", Level: 1, Seq: 8, HLC: core.HLC{Wall: 3}}},
		Reason:    "because",
		Bulk:      true,
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range []core.Message{sample(), {Type: core.MsgHello, From: "a", To: "b"}} {
		got, err := Decode(Append(nil, &m))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
		if n, hint := len(Append(nil, &m)), SizeHint(&m); n > hint {
			t.Fatalf("encoded %d bytes, SizeHint %d", n, hint)
		}
	}
}

// TestCoversEveryField fails when core.Message gains a field: the sample
// (and the encoding) must then be extended, or the field would silently
// not travel.
func TestCoversEveryField(t *testing.T) {
	m := sample()
	v := reflect.ValueOf(m)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("sample leaves core.Message.%s unset: encode it and set it here", v.Type().Field(i).Name)
		}
	}
}

func TestMalformed(t *testing.T) {
	m := sample()
	b := Append(nil, &m)
	for i := 0; i < len(b); i++ {
		if _, err := Decode(b[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	if _, err := Decode(append(b, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	bad := append([]byte{}, b...)
	bad[0] = 9
	if _, err := Decode(bad); err == nil {
		t.Fatal("other format accepted")
	}
}

func FuzzDecode(f *testing.F) {
	m := sample()
	f.Add(Append(nil, &m))
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Append(nil, &m))
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(m)) {
			t.Fatalf("re-encoding a decoded message changed it: %v", err)
		}
	})
}

// normalize maps empty payloads to nil so DeepEqual compares content.
func normalize(m core.Message) core.Message {
	for i := range m.Entries {
		if len(m.Entries[i].Payload) == 0 {
			m.Entries[i].Payload = nil
		}
	}
	return m
}

func BenchmarkAppendDecode(b *testing.B) {
	s := core.StreamID{Origin: "us-east-1", Name: "kv"}
	m := core.Message{Type: core.MsgData, From: "us-east-1", To: "eu-west-1"}
	payload := make([]byte, 256)
	for i := range 1000 {
		m.Entries = append(m.Entries, core.Entry{Stream: s, Seq: uint64(i + 1), HLC: core.HLC{Wall: int64(i)}, Payload: payload})
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], &m)
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(m.Entries))/b.Elapsed().Seconds(), "entries/s")
}
