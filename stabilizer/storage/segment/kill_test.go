package segment

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

// A re-executed test binary with killChildEnv set runs killChild in that
// directory instead of the test, seeded with killSeedEnv.
const (
	killChildEnv  = "SEGMENT_KILL_CHILD_DIR"
	killSeedEnv   = "SEGMENT_KILL_CHILD_SEED"
	killFreezeEnv = "SEGMENT_KILL_CHILD_FREEZE"
	killSegment   = 256 << 10
	killMaxSize   = 96 << 10
	killRounds    = 15
)

var killStreams = []string{"k0", "k1"}

// TestKill9 runs a writer in a child process and kills it with SIGKILL at a
// random point in each of several rounds on the same directory. In odd
// rounds the kill comes after a seeded number of lines of the child's
// output, each printed right after an Append or Sync returned, so that it
// often lands in the middle of the next Append; in even rounds the child
// freezes just before a seeded n-th file write, sync, create or remove (a
// header written and its payload not, a Sync before its fdatasync), and is
// killed there. After each kill it opens the directory and
// checks that every record a Sync reported is there and intact, and that
// every record Open reports reads back intact; the next child continues
// appending from the head Open recovered.
//
// SIGKILL loses what is in the process, not the kernel's page cache; power
// loss is TestPowerLoss's.
func TestKill9(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		seed, _ := strconv.ParseUint(os.Getenv(killSeedEnv), 10, 64)
		freeze, _ := strconv.Atoi(os.Getenv(killFreezeEnv))
		killChild(dir, seed, freeze) // never returns
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	m := crashModel{durable: map[string]uint64{}, floor: map[string]uint64{}}
	for round := 0; round < killRounds; round++ {
		after, freeze := 1+rng.IntN(60), 0
		if round%2 == 0 {
			after, freeze = 1<<30, 1+rng.IntN(80)
		}
		runKillChild(t, dir, rng.Uint64(), after, freeze, m)
		checkAfterKill(t, dir, round, m)
	}
}

// killChild appends groups of 1..4 records to each of killStreams, printing
// "a <stream> <head>" after each, syncs, and prints "d <stream> <seq>" for
// each durable head Sync reports; now and then it prints "t <stream>
// <upto>" and truncates. It runs until killed. If freeze > 0 it prints
// "f <op> <n>" before its freeze-th file write, sync, create or remove, and
// waits there to be killed.
func killChild(dir string, seed uint64, freeze int) {
	fail := func(what string, err error) {
		fmt.Fprintln(os.Stderr, "child", what+":", err)
		os.Exit(2)
	}
	// A child has no testing.T: its warnings go to stderr, which the
	// parent shows if the child fails.
	ops := 0
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && op.Kind != errorfs.OpFileClose {
			if ops++; ops == freeze {
				fmt.Fprintf(os.Stdout, "f %d %d\n", op.Kind, ops)
				select {}
			}
		}
		return nil
	}))
	s, err := Open(Config{Dir: dir, FS: fs, SegmentBytes: killSegment,
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn})})
	if err != nil {
		fail("open", err)
	}
	heads, durable := map[string]uint64{}, map[string]uint64{}
	for _, si := range s.Streams() {
		heads[si.Stream], durable[si.Stream] = si.Head, si.Durable
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for {
		for _, st := range killStreams {
			n := uint64(1 + rng.IntN(4))
			if err := s.Append("o", st, recs(st, heads[st]+1, heads[st]+n, killMaxSize)); err != nil {
				fail("append", err)
			}
			heads[st] += n
			fmt.Fprintf(os.Stdout, "a %s %d\n", st, heads[st]) // one write(2) per line
		}
		d, err := s.Sync()
		if err != nil {
			fail("sync", err)
		}
		for _, x := range d {
			durable[x.Stream] = x.Seq
			fmt.Fprintf(os.Stdout, "d %s %d\n", x.Stream, x.Seq)
		}
		if st := killStreams[rng.IntN(len(killStreams))]; rng.IntN(8) == 0 && durable[st] > 20 {
			// Printed first: a kill between the two leaves it possibly done.
			fmt.Fprintf(os.Stdout, "t %s %d\n", st, durable[st]-20)
			if err := s.Truncate("o", st, durable[st]-20); err != nil {
				fail("truncate", err)
			}
		}
	}
}

// runKillChild starts a writer child, kills it once it has printed after
// lines or frozen, and records what it reported in m.
func runKillChild(t *testing.T, dir string, seed uint64, after, freeze int, m crashModel) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killSeedEnv+"="+strconv.FormatUint(seed, 10),
		killFreezeEnv+"="+strconv.Itoa(freeze))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A watchdog, not a synchronisation: a child that stops reporting is
	// killed, and the test fails below.
	watchdog := time.AfterFunc(testhelp.DefaultTimeout, func() { _ = cmd.Process.Kill() })
	defer watchdog.Stop()
	seen, frozen := 0, false
	sc := bufio.NewScanner(out)
	for seen < after && !frozen && sc.Scan() {
		frozen = recordKillLine(t, sc.Text(), m)
		seen++
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	for sc.Scan() { // written before the kill: reported too
		recordKillLine(t, sc.Text(), m)
	}
	_ = cmd.Wait()
	if seen < after && !frozen {
		t.Fatalf("child printed %d lines of %d and did not freeze; stderr:\n%s", seen, after, stderr.String())
	}
}

// recordKillLine records a child's line in m; it reports whether the child
// froze.
func recordKillLine(t *testing.T, line string, m crashModel) bool {
	f := strings.Fields(line)
	seq, err := strconv.ParseUint(f[len(f)-1], 10, 64)
	if len(f) != 3 || err != nil {
		t.Fatalf("child printed %q", line)
	}
	switch f[0] {
	case "f":
		return true
	case "a":
	case "d":
		m.durable[f[1]] = max(m.durable[f[1]], seq)
	case "t":
		m.floor[f[1]] = max(m.floor[f[1]], seq)
	default:
		t.Fatalf("child printed %q", line)
	}
	return false
}

// checkAfterKill opens dir and checks it against what the children
// reported.
func checkAfterKill(t *testing.T, dir string, round int, m crashModel) {
	t.Helper()
	s, err := Open(Config{Dir: dir, SegmentBytes: killSegment, Logger: testhelp.Logger(t, "segment")})
	if err != nil {
		t.Fatalf("round %d: open: %v", round, err)
	}
	defer s.Close()
	for _, st := range killStreams {
		si, ok := info(s, "o", st)
		need, floor := m.durable[st], m.floor[st]
		if need > floor && (!ok || si.Head < need || si.First == 0 || si.First > floor+1) {
			t.Fatalf("round %d: %s: %+v; reported durable %d above truncation %d", round, st, si, need, floor)
		}
		if !ok {
			continue
		}
		got, err := s.Read("o", st, si.First, 0, 0)
		if err != nil {
			t.Fatalf("round %d: %s: read %d..%d: %v", round, st, si.First, si.Head, err)
		}
		checkRead(t, got, st, si.First, si.Head, killMaxSize)
		t.Logf("round %d: %s holds %d..%d, reported durable %d, truncated to %d",
			round, st, si.First, si.Head, need, floor)
	}
	t.Logf("round %d: open cut %v streams", round, counter(s.metrics.tornTails))
}
