package frontier

import (
	"encoding/binary"
	"testing"
)

// FuzzCompile: Compile never panics, and whatever it accepts evaluates (with
// its dual) without panicking and within the bound of the acks it reads.
func FuzzCompile(f *testing.F) {
	for _, src := range []string{
		"majority(persisted(sites))",
		`min(persisted(origin), quorum(2, received(group("x"))))`,
		`kth_min(2, [persisted("a"), max(applied(others()))])`,
		`level("verified", except(sites, origin, self))`,
		"persisted(origin) + 1",
		"none",
	} {
		f.Add(src, []byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(0), uint8(1))
	}
	s := propSchema()
	f.Fuzz(func(t *testing.T, src string, table []byte, origin, self uint8) {
		p, err := Compile(src, s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("compile error of type %T: %v", err, err)
			}
			return
		}
		acks := make([]uint64, s.TableSize())
		var bound uint64
		for i := range acks {
			if len(table) >= 2 {
				acks[i] = uint64(binary.LittleEndian.Uint16(table))
				table = table[2:]
			}
			if p.ReadsLevel(i / len(s.Sites)) {
				bound = max(bound, acks[i])
			}
		}
		o, sf := int(origin)%len(s.Sites), int(self)%len(s.Sites)
		v, err := p.Eval(acks, o, sf)
		if err != nil {
			t.Fatal(err)
		}
		if v > bound {
			t.Fatalf("%s = %d exceeds bound %d", src, v, bound)
		}
		d := p.Dual()
		if _, err := d.Eval(acks, o, sf); err != nil {
			t.Fatal(err)
		}
		_ = d.SourceAt(o, sf)
		_ = d.String()
	})
}
