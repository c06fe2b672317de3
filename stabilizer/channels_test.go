package stabilizer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestApplicationChannel(t *testing.T) {
	got := make(chan string, 10)
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"a", "b"},
		Setup: func(_ string, n *stabilizer.Node) error {
			if err := n.HandleChannel(0x90, func(from string, frame []byte) { got <- from + ":" + string(frame) }); err != nil {
				return err
			}
			if err := n.HandleChannel(0x10, nil); err == nil {
				return errors.New("a tag below MinChannelTag was accepted")
			}
			return nil
		}})
	if err := c.Node("a").HandleChannel(0x91, nil); err == nil {
		t.Fatal("registering after Start was accepted")
	}
	if err := c.Node("a").SendChannel("b", 0x90, []byte("raft")); err != nil {
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
