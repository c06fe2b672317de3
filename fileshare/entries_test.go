package fileshare

import (
	"bytes"
	"crypto/sha256"
	"testing"
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
		for _, origin := range []string{"us-east-1", ""} {
			o, seq, ok := decodeEntryKey(entryKey(origin, m.Seq))
			if !ok || o != origin || seq != m.Seq {
				t.Errorf("key of %s:%d decodes to %q:%d, %v", origin, m.Seq, o, seq, ok)
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
	// One origin's keys never fall under another's prefix.
	if bytes.HasPrefix(entryKey("us-east-10", 1), entryPrefix("us-east-1")) {
		t.Error("an origin's prefix covers another origin's keys")
	}
}

func FuzzEntryDecoders(f *testing.F) {
	data := []byte("x")
	f.Add(relocFrame(sha256.Sum256(data), data))
	f.Add(encodeEntryMeta(entryMeta{Hash: sha256.Sum256(data), Size: 9, Reloc: true}))
	f.Add(entryKey("eu-west-1", 42))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, d, _, ok := parseEntry(b); ok && sha256.Sum256(d) != h {
			t.Fatalf("parseEntry(%x) returned bytes that do not match its hash", b)
		}
		if m, err := decodeEntryMeta(3, b); err == nil {
			if got, err := decodeEntryMeta(3, encodeEntryMeta(m)); err != nil || got != m {
				t.Fatalf("index record %x: %+v does not round-trip: %+v, %v", b, m, got, err)
			}
		}
		if o, seq, ok := decodeEntryKey(b); ok && !bytes.Equal(entryKey(o, seq), b) {
			t.Fatalf("index key %x decodes to %q:%d, which encodes otherwise", b, o, seq)
		}
	})
}
