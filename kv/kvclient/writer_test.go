package kvclient

import (
	"fmt"
	"testing"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// sentMsgs is a client stream that keeps what is sent on it.
type sentMsgs struct {
	kvpb.KV_WritesClient
	msgs []*kvpb.WriteRequest
}

func (s *sentMsgs) Send(m *kvpb.WriteRequest) error {
	s.msgs = append(s.msgs, m)
	return nil
}

// TestClientBatchSizes: once the site reads batches, the client puts as
// many queued writes in one message as maxBatchWrites and streamMaxBytes
// allow, a write too large to share a message alone; before, one each.
func TestClientBatchSizes(t *testing.T) {
	calls := func(n, valueBytes int) []*call {
		cs := make([]*call, n)
		for i := range cs {
			cs[i] = &call{req: kvpb.WriteRequest{Id: uint64(i + 1), Key: fmt.Sprintf("k/%d", i), Value: make([]byte, valueBytes)}}
		}
		return cs
	}
	sizes := func(batched bool, cs []*call) []int {
		w := &streamWriter{}
		w.batched.Store(batched)
		st := &sentMsgs{}
		for i := 0; i < len(cs); {
			n, err := w.sendSome(st, cs[i:])
			if err != nil {
				t.Fatal(err)
			}
			i += n
		}
		var out []int
		next := uint64(1)
		for _, m := range st.msgs {
			ws := []*kvpb.WriteRequest{m}
			if m.Id == 0 {
				ws = m.More
			}
			for _, r := range ws {
				if r.Id != next {
					t.Fatalf("write %d sent where %d was due", r.Id, next)
				}
				next++
			}
			out = append(out, len(ws))
		}
		return out
	}
	for _, tc := range []struct {
		batched   bool
		n, value  int
		wantSizes string
	}{
		{false, 3, 10, "[1 1 1]"},
		{true, 1, 10, "[1]"},
		{true, 300, 10, "[256 44]"},
		{true, 4, 30 << 10, "[2 2]"},
		{true, 2, 64 << 10, "[1 1]"},
	} {
		if got := fmt.Sprint(sizes(tc.batched, calls(tc.n, tc.value))); got != tc.wantSizes {
			t.Errorf("batched %v, %d writes of %d bytes: messages of %s writes, want %s", tc.batched, tc.n, tc.value, got, tc.wantSizes)
		}
	}
}
