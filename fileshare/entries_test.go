package fileshare

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer"
)

func TestParseEntry(t *testing.T) {
	data := []byte("chunk bytes")
	h := sha256.Sum256(data)
	forged := relocFrame(h, data)
	forged[len(forged)-1] ^= 1 // the hash no longer matches: an upload
	for _, tc := range []struct {
		name      string
		payload   []byte
		h         [32]byte
		data      []byte
		reloc, ok bool
	}{
		{"upload", data, h, data, false, true},
		{"relocation", relocFrame(h, data), h, data, true, true},
		{"magic without a matching hash is an upload", forged, sha256.Sum256(forged), forged, false, true},
		{"empty", nil, [32]byte{}, nil, false, false},
		{"too large", make([]byte, MaxChunkBytes+1), [32]byte{}, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, data, reloc, ok := parseEntry(tc.payload)
			if ok != tc.ok || reloc != tc.reloc || (ok && (h != tc.h || !bytes.Equal(data, tc.data))) {
				t.Errorf("parseEntry = %x, %q, reloc %v, ok %v; want %x, %q, %v, %v", h[:4], data, reloc, ok, tc.h[:4], tc.data, tc.reloc, tc.ok)
			}
		})
	}
	if !looksRelocated(relocFrame(h, data)) || looksRelocated(data) {
		t.Error("looksRelocated is wrong")
	}
}

func TestEntryIndexRoundTrip(t *testing.T) {
	for _, m := range []entryMeta{
		{Seq: 1, Hash: sha256.Sum256([]byte("a")), Size: 4096},
		{Seq: 1 << 40, Hash: sha256.Sum256([]byte("b")), Size: MaxChunkBytes + uint32(relocHeader), Reloc: true},
		{Seq: 7, Size: 0, Bad: true},
	} {
		for _, id := range []stabilizer.StreamID{{Origin: "us-east-1", Name: Stream}, {Origin: "", Name: Stream},
			{Origin: "us-east-1", Name: Stream + "/1"}, {Origin: "", Name: Stream + "/12"}} {
			got, seq, ok := decodeEntryKey(entryKey(id, m.Seq))
			if !ok || got != id || seq != m.Seq {
				t.Errorf("key of %s:%d decodes to %s:%d, %v", id, m.Seq, got, seq, ok)
			}
		}
		got, err := decodeEntryMeta(m.Seq, encodeEntryMeta(m))
		if err != nil || got != m {
			t.Errorf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
	for _, b := range [][]byte{nil, {4}, {0, 1, 2}, append(encodeEntryMeta(entryMeta{Size: 3}), 0)} {
		if _, err := decodeEntryMeta(1, b); err == nil {
			t.Errorf("decodeEntryMeta(%x) took a corrupt record", b)
		}
	}
	// One stream's keys never fall under another's prefix.
	ids := []stabilizer.StreamID{{Origin: "us-east-1", Name: Stream}, {Origin: "us-east-10", Name: Stream},
		{Origin: "us-east-1", Name: Stream + "/1"}, {Origin: "us-east-1", Name: Stream + "/10"}, {Origin: "us-east-10", Name: Stream + "/1"}}
	for _, a := range ids {
		for _, b := range ids {
			if a != b && bytes.HasPrefix(entryKey(b, 1), entryPrefix(a)) {
				t.Errorf("the prefix of %s covers a key of %s", a, b)
			}
		}
	}
	// Not keys: a stripe spelled out for stream "files", another stream.
	for _, c := range []string{"us-east-1\x00files", "us-east-1\x00kv", "us-east-1\x00", "us-east-1\x00files/1\x00x"} {
		k := binary.AppendUvarint([]byte{prefixEntry}, uint64(len(c)))
		k = binary.BigEndian.AppendUint64(append(k, c...), 1)
		if id, _, ok := decodeEntryKey(k); ok {
			t.Errorf("decodeEntryKey(%q) = %s, want refused", c, id)
		}
	}
}

// TestIndexKeysOfOldFormat: the keys and locations a site wrote before
// transfers were striped (one stream, "files") read as stream Stream, and
// Stream's are still written so.
func TestIndexKeysOfOldFormat(t *testing.T) {
	// The key format of before: 'e', the origin (length first), the seq.
	old := binary.AppendUvarint([]byte{'e'}, 9)
	old = binary.BigEndian.AppendUint64(append(old, "us-east-1"...), 42)
	id, seq, ok := decodeEntryKey(old)
	if !ok || id != (stabilizer.StreamID{Origin: "us-east-1", Name: Stream}) || seq != 42 {
		t.Errorf("an index key of before decodes to %s:%d, %v", id, seq, ok)
	}
	if k := entryKey(stabilizer.StreamID{Origin: "us-east-1", Name: Stream}, 42); !bytes.Equal(k, old) {
		t.Errorf("stream %q's key is %x, want the format of before %x", Stream, k, old)
	}
	// The location format of before: the origin (length first), seq, size.
	loc := binary.AppendUvarint(nil, 9)
	loc = binary.AppendUvarint(append(loc, "eu-west-1"...), 7)
	loc = binary.AppendUvarint(loc, 4096)
	r, err := decodeRef(loc)
	if err != nil || r != (Ref{Origin: "eu-west-1", Stream: Stream, Seq: 7, Size: 4096}) {
		t.Errorf("a location of before decodes to %+v, %v", r, err)
	}
	if b := encodeRef(r); !bytes.Equal(b, loc) {
		t.Errorf("stream %q's location is %x, want the format of before %x", Stream, b, loc)
	}
}

func TestRefRoundTrip(t *testing.T) {
	for _, r := range []Ref{
		{Origin: "us-east-1", Stream: Stream, Seq: 1, Size: 1},
		{Origin: "us-east-1", Stream: Stream + "/1", Seq: 1 << 40, Size: MaxChunkBytes},
		{Origin: "", Stream: Stream + "/63", Seq: 3, Size: 0},
	} {
		got, err := decodeRef(encodeRef(r))
		if err != nil || got != r {
			t.Errorf("round trip of %+v: %+v, %v", r, got, err)
		}
		pb := chunkRef([]byte("h"), r)
		if (pb.Stream == "") != (r.Stream == Stream) || refOf(pb) != r {
			t.Errorf("%+v as a ChunkRef is %v, read back as %+v", r, pb, refOf(pb))
		}
	}
	good := encodeRef(Ref{Origin: "a", Stream: Stream + "/1", Seq: 1, Size: 1})
	for _, b := range [][]byte{nil, {5, 'a'}, good[:len(good)-1], append(good, 0),
		append(encodeRef(Ref{Origin: "a", Stream: Stream, Seq: 1, Size: 1}), 5, 'f', 'i', 'l', 'e', 's'),
		append(encodeRef(Ref{Origin: "a", Stream: Stream, Seq: 1, Size: 1}), 2, 'k', 'v')} {
		if r, err := decodeRef(b); err == nil {
			t.Errorf("decodeRef(%x) took a corrupt location: %+v", b, r)
		}
	}
}

func FuzzEntryDecoders(f *testing.F) {
	data := []byte("x")
	f.Add(relocFrame(sha256.Sum256(data), data))
	f.Add(encodeEntryMeta(entryMeta{Hash: sha256.Sum256(data), Size: 9, Reloc: true}))
	f.Add(entryKey(stabilizer.StreamID{Origin: "eu-west-1", Name: Stream}, 42))
	f.Add(entryKey(stabilizer.StreamID{Origin: "eu-west-1", Name: Stream + "/1"}, 42))
	f.Add(encodeRef(Ref{Origin: "eu-west-1", Stream: Stream + "/1", Seq: 9, Size: 100}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, d, _, ok := parseEntry(b); ok && sha256.Sum256(d) != h {
			t.Fatalf("parseEntry(%x) returned bytes that do not match its hash", b)
		}
		if m, err := decodeEntryMeta(3, b); err == nil {
			if got, err := decodeEntryMeta(3, encodeEntryMeta(m)); err != nil || got != m {
				t.Fatalf("index record %x: %+v does not round-trip: %+v, %v", b, m, got, err)
			}
		}
		if id, seq, ok := decodeEntryKey(b); ok && !bytes.Equal(entryKey(id, seq), b) {
			t.Fatalf("index key %x decodes to %s:%d, which encodes otherwise", b, id, seq)
		}
		if r, err := decodeRef(b); err == nil && !bytes.Equal(encodeRef(r), b) {
			t.Fatalf("location %x decodes to %+v, which encodes otherwise", b, r)
		}
	})
}
