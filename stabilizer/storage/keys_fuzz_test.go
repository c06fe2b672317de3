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
	blk := []Message{{Seq: 999, HLC: 5, Payload: []byte("ab")}, {Seq: 1000, HLC: 6}}
	v := make([]byte, blockLen(blk))
	putBlock(v, blk)
	f.Add(v)
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
		var msgs []Message
		if err := decodeMsgs(1000, b, func(m Message) bool { msgs = append(msgs, m); return true }); err == nil {
			re := encodeMsgValue(msgs[0])
			if b[0] == msgFormatBlock {
				re = make([]byte, blockLen(msgs))
				putBlock(re, msgs)
			}
			if !bytes.Equal(re, b) || msgs[len(msgs)-1].Seq != 1000 {
				t.Fatalf("message value %q does not round-trip: %q", b, re)
			}
		}
	})
}
