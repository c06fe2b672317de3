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
	stores := map[string]*simStore{"a": newStore(), "b": newStore()}
	cfg := func(site string) core.Config {
		return core.Config{Site: site, Schema: schema, Storage: stores[site], BulkStreams: []string{"files"},
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
					persistBulk(t, c, stores[name], rd.BulkEntries)
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

// persistBulk stands for a driver's bulk store: it appends bulk entries to
// st and tells the core they are durable.
func persistBulk(t *testing.T, c *core.Core, st *simStore, ents []core.Entry) {
	t.Helper()
	for _, e := range ents {
		st.log[e.Stream] = append(st.log[e.Stream], e)
		if err := c.BulkPersisted(e.Stream, e.Seq); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBulkDurableApart pins the two fsync domains: a bulk entry goes to
// the driver in Ready.BulkEntries, outside the batch a Ready syncs, and
// counts as persisted only once the driver says so (BulkPersisted). Until
// then it is neither sent, delivered nor acked persisted, while an entry of
// another stream appended with it goes out at once; and the bulk window
// is released by the receiver's persisted acks, not its received ones.
func TestBulkDurableApart(t *testing.T) {
	schema := &frontier.Schema{Sites: []string{"a", "b"}}
	stores := map[string]*simStore{"a": newStore(), "b": newStore()}
	cfg := func(site string) core.Config {
		return core.Config{Site: site, Schema: schema, Storage: stores[site], BulkStreams: []string{"files"},
			MaxBulkInflightBytes: 64 << 10}
	}
	cores := map[string]*core.Core{}
	for _, site := range []string{"a", "b"} {
		c, err := core.New(cfg(site), core.State{})
		if err != nil {
			t.Fatal(err)
		}
		cores[site] = c
	}
	a := cores["a"]
	// bulk holds each site's bulk entries not yet made durable; sent
	// counts bulk entries a sent; delivered, what b's application got.
	bulk := map[string][]core.Entry{}
	sentBulk, delivered := 0, map[string]int{}
	pump := func() {
		for moved := true; moved; {
			moved = false
			for _, name := range []string{"a", "b"} {
				c := cores[name]
				for c.HasReady() {
					rd := c.Ready()
					for _, e := range rd.Entries {
						if e.Stream.Name == "files" {
							t.Fatalf("%s: bulk entry %d in Ready.Entries", name, e.Seq)
						}
						stores[name].log[e.Stream] = append(stores[name].log[e.Stream], e)
					}
					bulk[name] = append(bulk[name], rd.BulkEntries...)
					for _, e := range rd.Deliver {
						delivered[e.Stream.Name]++
					}
					for _, m := range rd.Messages {
						if name == "a" && m.Type == core.MsgData && m.Bulk {
							sentBulk += len(m.Entries)
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
	for name, peer := range map[string]string{"a": "b", "b": "a"} {
		if err := cores[name].Connected(peer); err != nil {
			t.Fatal(err)
		}
	}
	pump()
	files := core.StreamID{Origin: "a", Name: "files"}
	chunk := bytes.Repeat([]byte("c"), 40<<10)
	for range 3 {
		if _, _, err := a.Append("files", chunk); err != nil {
			t.Fatal(err)
		}
	}
	kvSeq, _, err := a.Append("kv", []byte("job-7 running"))
	if err != nil {
		t.Fatal(err)
	}
	pump()
	if f, _ := a.Frontier(core.StreamID{Origin: "a", Name: "kv"}, "all"); f.Seq != kvSeq {
		t.Errorf("kv frontier under all = %d while bulk entries wait for their store, want %d", f.Seq, kvSeq)
	}
	if sentBulk != 0 {
		t.Fatalf("a sent %d bulk entries it had not made durable", sentBulk)
	}
	if _, persisted, _ := a.Head(files); persisted != 0 {
		t.Fatalf("a counts files persisted up to %d before its bulk store said so", persisted)
	}
	if len(bulk["a"]) != 3 {
		t.Fatalf("a handed out %d bulk entries, want 3", len(bulk["a"]))
	}
	if delivered["files"] != 0 {
		t.Fatalf("%d bulk entries delivered before they were durable", delivered["files"])
	}
	persistBulk(t, a, stores["a"], bulk["a"][:2])
	bulk["a"] = bulk["a"][2:]
	pump()
	// The window (64 KiB) holds one 40 KiB entry at a time: the second
	// waits until b persisted the first, which b has received by now.
	if sentBulk != 1 {
		t.Fatalf("a sent %d bulk entries before b persisted any, want 1 (the window)", sentBulk)
	}
	if acks, _ := a.Acks(files); acks[frontier.Received*2+1] != 1 || acks[frontier.Persisted*2+1] != 0 {
		t.Fatalf("a sees b's received and persisted cells %d and %d, want 1 and 0", acks[frontier.Received*2+1], acks[frontier.Persisted*2+1])
	}
	for len(bulk["a"])+len(bulk["b"]) > 0 {
		for _, name := range []string{"a", "b"} {
			persistBulk(t, cores[name], stores[name], bulk[name])
			bulk[name] = nil
		}
		pump()
	}
	if sentBulk != 3 {
		t.Fatalf("a sent %d bulk entries once every one was durable, want 3", sentBulk)
	}
	if f, _ := a.Frontier(files, "all"); f.Seq != 3 {
		t.Fatalf("files frontier under all = %d, want 3", f.Seq)
	}
	if err := a.BulkPersisted(files, 9); err == nil {
		t.Error("BulkPersisted beyond what was handed out succeeded")
	}
	if err := a.BulkPersisted(core.StreamID{Origin: "a", Name: "kv"}, 1); err == nil {
		t.Error("BulkPersisted of a stream that is not bulk succeeded")
	}
}
