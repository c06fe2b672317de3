package stabilizer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// blockingApp is an Applier whose Apply blocks, whatever its ctx, until
// release is closed: it holds a node's Close in the middle.
type blockingApp struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (a *blockingApp) Apply(context.Context, []stabilizer.Entry) error {
	a.once.Do(func() { close(a.entered) })
	<-a.release
	return nil
}

// TestCloseWaitsForAnotherClose: a Close that finds another one running
// (as the one a storage failure starts) returns only once the node is
// closed, storage included, not while pebble is still open.
func TestCloseWaitsForAnotherClose(t *testing.T) {
	app := &blockingApp{entered: make(chan struct{}), release: make(chan struct{})}
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"us-east-1"},
		Setup: func(_ string, n *stabilizer.Node) error { return n.Handle("log", app) }})
	n := c.Node("us-east-1")
	ctx := stabilizertest.Context(t, 0)
	if _, err := n.Append(ctx, "log", []byte("job/7")); err != nil {
		t.Fatal(err)
	}
	<-app.entered
	first := make(chan error, 1)
	go func() { first <- n.Close() }()
	stabilizertest.Eventually(t, 0, func() error {
		if _, err := n.Append(ctx, "log", nil); !errors.Is(err, stabilizer.ErrStopped) {
			return fmt.Errorf("the first Close has not begun: append says %v", err)
		}
		return nil
	})
	// The second Close, and then an attempt to open the site's storage,
	// which fails while the node still has it open.
	second := make(chan error, 1)
	go func() {
		if err := n.Close(); err != nil {
			second <- err
			return
		}
		_, closeAgain, err := openProbe(c.Dir("us-east-1"))
		if err == nil {
			err = closeAgain()
		} else {
			err = fmt.Errorf("the second Close returned with the storage still open: %w", err)
		}
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the second Close returned while the first waited for the application: %v", err)
	case <-time.After(100 * time.Millisecond):
		// Still waiting, as it should: the bound only gives a bug the
		// time to show.
	}
	close(app.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// openProbe opens a site's folder on a node of its own, which fails while
// another node has it open.
func openProbe(dir string) (*stabilizer.Node, func() error, error) {
	n, err := stabilizer.New(stabilizer.Config{Site: "us-east-1", Schema: &frontier.Schema{Sites: []string{"us-east-1"}}, Dir: dir})
	if err != nil {
		return nil, nil, err
	}
	return n, n.Close, nil
}

// TestStreamNamesWithNULSurviveRestart: a stream whose name holds NUL
// bytes, from this site or a peer, is recorded so that both sites restart
// and keep its frontiers.
func TestStreamNamesWithNULSurviveRestart(t *testing.T) {
	sites := []string{"us-east-1", "eu-west-1"}
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: sites})
	ctx := stabilizertest.Context(t, 0)
	a, err := c.Node("us-east-1").Append(ctx, "jobs\x00/7\x00x", []byte("job/7"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		if err := c.Node(s).WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sites {
		c.Stop(s)
	}
	for _, s := range sites {
		c.Start(s) // fails the test if the site refuses to restart
	}
	for _, s := range sites {
		f, err := c.Node(s).Frontier(ctx, a.Stream, "all")
		if err != nil || f.Seq != a.Seq {
			t.Errorf("%s after a restart: frontier of all %+v, %v; want %d", s, f, err, a.Seq)
		}
	}
}

// TestFirstAppendHasTheClock: a write appended as soon as the node starts
// is stamped with the physical clock, not with a time near zero that would
// lose every last-writer-wins contest.
func TestFirstAppendHasTheClock(t *testing.T) {
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"us-east-1"}, Stopped: []string{"us-east-1"}})
	before := time.Now().UnixNano()
	n := c.Start("us-east-1")
	a, err := n.Append(stabilizertest.Context(t, 0), "jobs", []byte("job/7"))
	if err != nil {
		t.Fatal(err)
	}
	if a.HLC.Wall < before {
		t.Fatalf("first append stamped %v, before the node started at %d", a.HLC, before)
	}
}
