package core_test

import (
	"bytes"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// TestBulkLaneDoesNotHoldBackData pins why bulk streams have a lane of
// their own: with the bulk window full and nothing of it acknowledged (a
// saturated link), an entry of another stream is still sent at once, on
// the data plane, and becomes stable.
func TestBulkLaneDoesNotHoldBackData(t *testing.T) {
	schema := &frontier.Schema{Sites: []string{"a", "b"}}
	cfg := func(site string) core.Config {
		return core.Config{Site: site, Schema: schema, Storage: newStore(), BulkStreams: []string{"files"},
			MaxInflightBytes: 64 << 10, MaxBulkInflightBytes: 256 << 10}
	}
	a, err := core.New(cfg("a"), core.State{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := core.New(cfg("b"), core.State{})
	if err != nil {
		t.Fatal(err)
	}
	cores := map[string]*core.Core{"a": a, "b": b}
	var held []core.Message // bulk data from a: the saturated link
	planes := map[core.Plane]int{}
	pump := func() {
		for moved := true; moved; {
			moved = false
			for name, c := range cores {
				for c.HasReady() {
					rd := c.Ready()
					for _, m := range rd.Messages {
						planes[m.Plane()]++
						if m.Plane() == core.PlaneBulk {
							held = append(held, m)
							continue
						}
						if err := cores[m.To].Step(m); err != nil {
							t.Fatalf("%s: step %v: %v", name, m, err)
						}
						moved = true
					}
					c.Advance()
				}
			}
		}
	}
	for _, c := range []struct {
		c    *core.Core
		peer string
	}{{a, "b"}, {b, "a"}} {
		if err := c.c.Connected(c.peer); err != nil {
			t.Fatal(err)
		}
	}
	pump()
	chunk := bytes.Repeat([]byte("c"), 100<<10)
	for range 8 {
		if _, _, err := a.Append("files", chunk); err != nil {
			t.Fatal(err)
		}
	}
	pump()
	if planes[core.PlaneBulk] == 0 {
		t.Fatal("no message of the bulk stream travelled on PlaneBulk")
	}
	sent := 0
	for _, m := range held {
		sent += len(m.Entries)
	}
	if sent >= 8 {
		t.Fatalf("all %d bulk entries were sent: the bulk window (256 KiB) did not bound them", sent)
	}
	seq, _, err := a.Append("kv", []byte("job-7 running"))
	if err != nil {
		t.Fatal(err)
	}
	pump()
	f, err := a.Frontier(core.StreamID{Origin: "a", Name: "kv"}, "all")
	if err != nil {
		t.Fatal(err)
	}
	if f.Seq < seq {
		t.Errorf("kv frontier under all = %d behind a full bulk window, want %d", f.Seq, seq)
	}
	if planes[core.PlaneData] == 0 {
		t.Error("the kv entry did not travel on the data plane")
	}
}
