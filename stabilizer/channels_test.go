package stabilizer

import (
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
)

func TestApplicationChannel(t *testing.T) {
	net := NewMemNetwork()
	defer net.Close()
	schema := &frontier.Schema{Sites: []string{"a", "b"}}
	got := make(chan string, 10)
	var nodes []*Node
	for _, s := range schema.Sites {
		n, err := New(Config{Site: s, Schema: schema, Dir: t.TempDir(), Transport: net.Transport(s), Logger: testLogger(t, s)})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.HandleChannel(0x90, func(from string, frame []byte) { got <- from + ":" + string(frame) }); err != nil {
			t.Fatal(err)
		}
		if err := n.HandleChannel(0x10, nil); err == nil {
			t.Fatal("a tag below MinChannelTag was accepted")
		}
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	if err := nodes[0].HandleChannel(0x91, nil); err == nil {
		t.Fatal("registering after Start was accepted")
	}
	if err := nodes[0].SendChannel("b", 0x90, []byte("raft")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "a:raft" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("frame never arrived")
	}
}
