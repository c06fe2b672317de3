package storage

import (
	"bytes"
	"testing"
)

// FuzzDecoders feeds arbitrary bytes to the decoders of keys and values
// read back from disk: they must fail cleanly, and what they accept must
// re-encode to the same bytes.
func FuzzDecoders(f *testing.F) {
	f.Add(ackKey("o", "s", "applied"))
	f.Add(encodeStreamState(streamState{head: 9, truncated: 3}))
	f.Add(encodeMsgValue(Message{Seq: 1, HLC: 2, Payload: []byte("p")}))
	f.Add([]byte{prefixAck, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		if o, s, rest, ok := decodeStreamKey(b); ok {
			re := append(streamPrefix(b[0], o, s), rest...)
			if !bytes.Equal(re, b) {
				t.Fatalf("stream key %q re-encodes to %q", b, re)
			}
		}
		if st, ok := decodeStreamState(b); ok && !bytes.Equal(encodeStreamState(st), b) {
			t.Fatalf("stream state %q does not round-trip", b)
		}
		if m, err := decodeMsgValue(1, b); err == nil && !bytes.Equal(encodeMsgValue(m), b) {
			t.Fatalf("message value %q does not round-trip", b)
		}
	})
}
