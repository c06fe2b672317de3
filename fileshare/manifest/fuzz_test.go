package manifest

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
)

// FuzzDecode: Decode never panics, and what it accepts is valid and
// survives Encode: re-encoded, it decodes to an equal message, and its
// encoding is stable.
func FuzzDecode(f *testing.F) {
	for _, v := range []*filesharepb.Version{valid(), tombstone(), emptyFile()} {
		b, err := Encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	bad := valid()
	bad.Path = "../x"
	b, _ := proto.Marshal(bad)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode(b)
		if err != nil {
			if v != nil {
				t.Errorf("Decode returned %v with error %v", v, err)
			}
			return
		}
		if err := Validate(v); err != nil {
			t.Fatalf("Decode accepted what Validate refuses: %v", err)
		}
		enc, err := Encode(v)
		if err != nil {
			t.Fatalf("Encode of a decoded version: %v", err)
		}
		w, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(b))): %v", err)
		}
		if !proto.Equal(v, w) {
			t.Fatalf("Decode(Encode(v)) = %v, want %v", w, v)
		}
		if enc2, err := Encode(w); err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: %x then %x (%v)", enc, enc2, err)
		}
		ToPlan(v)
	})
}
