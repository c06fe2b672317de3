package kv

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// TestApplyOrderDoesNotDecideTheWinner applies versions of one key from
// three origins in every order, some with equal HLCs, some with negative
// wall clocks, with and without watchers: the latest is always the one
// Version.Newer picks, although applying never reads what is stored.
func TestApplyOrderDoesNotDecideTheWinner(t *testing.T) {
	ents := []core.Entry{
		{Stream: core.StreamID{Origin: "a", Name: Stream}, Seq: 1, HLC: core.HLC{Wall: 100, Logical: 2}},
		{Stream: core.StreamID{Origin: "b", Name: Stream}, Seq: 1, HLC: core.HLC{Wall: 100, Logical: 2}},
		{Stream: core.StreamID{Origin: "c", Name: Stream}, Seq: 1, HLC: core.HLC{Wall: -5, Logical: 9}},
		{Stream: core.StreamID{Origin: "c", Name: Stream}, Seq: 2, HLC: core.HLC{Wall: 99, Logical: 7}},
	}
	for i := range ents {
		ents[i].Payload = encodeOp(opPut, "job/7", []byte(ents[i].Stream.Origin))
	}
	orders := [][]int{{0, 1, 2, 3}, {1, 0, 3, 2}, {3, 2, 1, 0}, {2, 1, 3, 0}}
	for _, order := range orders {
		for _, watch := range []bool{false, true} {
			st, err := storage.Open(storage.Config{Dir: t.TempDir(), Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			s := &state{st: st}
			var seen []string
			for _, i := range order {
				changed, err := s.apply(context.Background(), ents[i].Stream.Origin, ents[i:i+1], watch)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range changed {
					seen = append(seen, v.Origin)
				}
			}
			v, found, err := s.latest("job/7")
			if err != nil || !found || v.Origin != "b" || string(v.Value) != "b" {
				t.Errorf("order %v watch %v: latest %+v found %v err %v, want b's version", order, watch, v, found, err)
			}
			if !watch && len(seen) != 0 {
				t.Errorf("order %v: changes %v returned without watchers", order, seen)
			}
			if watch && (len(seen) == 0 || seen[len(seen)-1] != "b") {
				t.Errorf("order %v: watchers saw %v, want b last", order, seen)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
