package lin

import (
	"fmt"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestPreferredLeader(t *testing.T) {
	const preferred = "ap-south-1"
	c := newCluster(t, 3, func(cfg *Config) { cfg.Preferred = preferred })
	isLeader := func() error {
		if l := c.waitLeader(c.sites, 5*time.Second); l != preferred {
			return fmt.Errorf("leader is %s, want %s", l, preferred)
		}
		return nil
	}
	eventually(t, 5*time.Second, isLeader)

	// While the preferred site is down another leads; once it is back and
	// caught up, leadership returns to it.
	c.stop(preferred)
	rest := []string{"us-east-1", "eu-west-1"}
	other := c.waitLeader(rest, 5*time.Second)
	t.Logf("%s down, %s leads", preferred, other)
	ctx := stabilizertest.Context(t, 10*time.Second)
	if _, err := c.node(other).Put(ctx, "job/1", []byte("moved")); err != nil {
		t.Fatal(err)
	}
	c.start(preferred)
	eventually(t, 5*time.Second, isLeader)
	if it, err := c.node(preferred).Get(ctx, "job/1"); err != nil || string(it.Value) != "moved" {
		t.Fatalf("get at preferred leader: %+v, %v", it, err)
	}
}
