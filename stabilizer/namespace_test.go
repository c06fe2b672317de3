package stabilizer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// The crash child: a one-site node in the folder crashChildEnv names,
// appending to its stream "log" as fast as it can while a counting
// application applies it; killed with SIGKILL by the parent.
const (
	crashChildEnv  = "STABILIZER_NS_CRASH_DIR"
	crashVerifyEnv = "STABILIZER_NS_CRASH_VERIFY"
	// crashNoPosEnv makes the application commit without its position, to
	// show that the test catches what that costs.
	crashNoPosEnv = "STABILIZER_NS_CRASH_NO_POSITION"
)

// counter applies entries in a way that is not idempotent: it adds their
// number to a count and marks each seq, in one batch with its position.
// Applied twice or skipped, an entry shows in the count.
type counter struct {
	ns    *stabilizer.Namespace
	noPos bool
}

var countKey = []byte("count")

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte("e/"), seq) }

func (c *counter) count() (uint64, error) {
	v, err := c.ns.Get(countKey)
	if errors.Is(err, stabilizer.ErrNotFound) {
		return 0, nil
	}
	if err != nil || len(v) != 8 {
		return 0, fmt.Errorf("count: %q %v", v, err)
	}
	return binary.BigEndian.Uint64(v), nil
}

func (c *counter) Apply(_ context.Context, ents []stabilizer.Entry) error {
	n, err := c.count()
	if err != nil {
		return err
	}
	b := c.ns.NewBatch()
	for _, e := range ents {
		b.Set(seqKey(e.Seq), nil)
	}
	b.Set(countKey, binary.BigEndian.AppendUint64(nil, n+uint64(len(ents))))
	if !c.noPos {
		b.SetApplied(ents[0].Stream, ents[len(ents)-1].Seq)
	}
	// As kv does: no fsync of its own.
	return b.CommitNoSync()
}

func openCounter(dir string, noPos bool) (*stabilizer.Node, *counter, error) {
	n, err := stabilizer.New(stabilizer.Config{Site: "us-east-1", Schema: &frontier.Schema{Sites: []string{"us-east-1"}}, Dir: dir})
	if err != nil {
		return nil, nil, err
	}
	ns, err := n.Namespace("count")
	if err != nil {
		return nil, nil, err
	}
	c := &counter{ns: ns, noPos: noPos}
	if err := n.Handle("log", c); err != nil {
		return nil, nil, err
	}
	return n, c, n.Start()
}

// TestNamespaceCrashChild is the child of TestNamespaceBatchSurvivesKill;
// run alone, it does nothing.
func TestNamespaceCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("the child of TestNamespaceBatchSurvivesKill")
	}
	n, c, err := openCounter(dir, os.Getenv(crashNoPosEnv) != "")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	if os.Getenv(crashVerifyEnv) != "" {
		fmt.Println(verifyCounter(ctx, n, c))
		os.Exit(0)
	}
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = []byte("job/7 checkpointed")
	}
	// Appends are paced by their own fsyncs, not by the application: each
	// fsync also makes durable the state applied before it, while the
	// applied acks lag behind, which is where a position kept apart from
	// the state would go wrong.
	go func() {
		for {
			as, err := n.AppendBatch(ctx, "log", batch)
			if err == nil {
				last := as[len(as)-1]
				err = n.WaitFor(ctx, last.Stream, "local", last.Seq)
			}
			if err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
		}
	}()
	id := stabilizer.StreamID{Origin: "us-east-1", Name: "log"}
	for {
		// The parent kills once enough is applied.
		f, err := n.Frontier(ctx, id, "applied(self)")
		if err != nil && !errors.Is(err, stabilizer.ErrUnknownStream) {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("applied", f.Seq)
		time.Sleep(time.Millisecond) // a progress report's pace, not a synchronisation
	}
}

// verifyCounter waits until the site applied all it persisted and says
// whether count and marks agree with the log exactly.
func verifyCounter(ctx context.Context, n *stabilizer.Node, c *counter) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	streams, err := n.Streams(ctx)
	if err != nil || len(streams) != 1 {
		return fmt.Sprintf("error streams %v %v", streams, err)
	}
	id, head := streams[0].Stream, streams[0].Persisted
	if err := n.WaitFor(ctx, id, "applied(self)", head); err != nil {
		return "error " + err.Error()
	}
	count, err := c.count()
	if err != nil {
		return "error " + err.Error()
	}
	marks := uint64(0)
	err = c.ns.ScanPrefix([]byte("e/"), func(k, _ []byte) error {
		marks++
		if seq := binary.BigEndian.Uint64(k[2:]); seq != marks {
			return fmt.Errorf("seq %d marked where %d was due", seq, marks)
		}
		return nil
	})
	if err != nil {
		return "error " + err.Error()
	}
	return fmt.Sprintf("head %d count %d marks %d", head, count, marks)
}

// TestNamespaceBatchSurvivesKill: an application's state and the position
// it reports with Batch.SetApplied commit atomically, so after kill -9 in
// the middle of applying, and a restart, every persisted entry is applied
// exactly once: the non-idempotent count equals the log's head. Without
// the position (the child's noPos mode), the same kills make it count
// entries twice, which shows the test can fail.
func TestNamespaceBatchSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	for _, noPos := range []bool{false, true} {
		t.Run(map[bool]string{false: "with position", true: "without position"}[noPos], func(t *testing.T) {
			dir := t.TempDir()
			// Without the position a round double-counts only when the
			// kill lands in a narrow window: up to 25 rounds, stopping at
			// the first that shows it.
			rounds := map[bool]int{false: 4, true: 25}[noPos]
			applied := 0
			for round := range rounds {
				applied = int(runCounterChild(t, dir, noPos, applied+2000))
				res := verifyChild(t, dir, noPos)
				var head, count, marks uint64
				if _, err := fmt.Sscanf(res, "head %d count %d marks %d", &head, &count, &marks); err != nil {
					t.Fatalf("round %d: verify: %s", round, res)
				}
				t.Logf("round %d: killed at %d applied; after the restart: %s", round, applied, res)
				switch {
				case !noPos && (count != head || marks != head):
					t.Fatalf("round %d: %s; want every entry applied once", round, res)
				case noPos && count != head:
					return // the kills cost what the position protects against
				}
			}
			if noPos {
				t.Fatalf("without positions %d kills cost nothing: the test cannot tell", rounds)
			}
		})
	}
}

func childCmd(dir string, noPos bool, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestNamespaceCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	if noPos {
		cmd.Env = append(cmd.Env, crashNoPosEnv+"=1")
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runCounterChild starts the child, kills it once it applied at least
// minApplied entries in all, and returns how many it had.
func runCounterChild(t *testing.T, dir string, noPos bool, minApplied int) uint64 {
	t.Helper()
	cmd := childCmd(dir, noPos)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(stabilizertest.DefaultTimeout)
	var applied uint64
	for applied < uint64(minApplied) && sc.Scan() {
		line := sc.Text()
		v, ok := strings.CutPrefix(line, "applied ")
		if !ok {
			t.Fatalf("child: %s\n%s", line, stderr.String())
		}
		if applied, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("child: %s", line)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child applied only %d in %v", applied, stabilizertest.DefaultTimeout)
		}
	}
	if applied < uint64(minApplied) {
		t.Fatalf("the child stopped at %d applied: %v\n%s", applied, sc.Err(), stderr.String())
	}
	// SIGKILL while it appends and applies.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	return applied
}

func verifyChild(t *testing.T, dir string, noPos bool) string {
	t.Helper()
	out, err := childCmd(dir, noPos, crashVerifyEnv+"=1").Output()
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "head ") || strings.HasPrefix(line, "error ") {
			return line
		}
	}
	return string(out)
}
