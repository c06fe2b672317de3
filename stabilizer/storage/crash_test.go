package storage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

// crashChildEnv names the directory a re-executed test binary writes to
// until it is killed.
const crashChildEnv = "STORAGE_CRASH_CHILD_DIR"

const crashStreams = 4

// crashChild opens the store in dir and, on crashStreams goroutines, appends
// to stream c<i> continuing from its head, with an ack and an application
// key in the same batch. After each Write returns nil it prints
// "c<i> <seq>" to stdout. It runs until killed.
func crashChild(dir string) {
	// A child process has no testing.T: warnings go to stderr, which the
	// parent prints when the child fails.
	s, err := Open(Config{Dir: dir, Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn})})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	for i := 0; i < crashStreams; i++ {
		go func() {
			stream := fmt.Sprintf("c%d", i)
			for seq := s.Head("o", stream) + 1; ; seq++ {
				var b Batch
				// Several sizes, so some groups are large.
				b.Append("o", stream, Message{Seq: seq, HLC: seq, Payload: payload("o", stream, seq, 1+int(seq%7)*1000)})
				b.SetAck("o", stream, "applied", seq)
				b.AppSet("crash", []byte(stream), []byte(strconv.FormatUint(seq, 10)))
				if err := s.Write(context.Background(), &b); err != nil {
					fmt.Fprintln(os.Stderr, "child write:", err)
					os.Exit(3)
				}
				outMu.Lock()
				// One write(2) per line: what the parent read was acknowledged.
				fmt.Fprintf(os.Stdout, "%s %d\n", stream, seq)
				outMu.Unlock()
			}
		}()
	}
	select {}
}

// TestCrashKill9KeepsAcknowledgedWrites re-executes the test binary as a
// writer, kills it with SIGKILL mid-stream, reopens the directory and checks
// that every Write the child reported as successful is there, that each
// stream is gapless up to its head with the right bytes, and that the ack and
// application key written atomically with the messages agree with the head.
// It does this three times on the same directory, so each child continues
// the numbering its predecessor left.
//
// SIGKILL loses what is in the process, not what is in the kernel's page
// cache; power loss is not simulated here.
func TestCrashKill9KeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	acked := make(map[string]uint64)
	for round := 0; round < 3; round++ {
		runCrashChild(t, dir, acked, 1500*(round+1))
		s, err := Open(Config{Dir: dir, Logger: testhelp.Logger(t, "storage")})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		for i := 0; i < crashStreams; i++ {
			stream := fmt.Sprintf("c%d", i)
			head := s.Head("o", stream)
			if head < acked[stream] {
				t.Errorf("round %d: %s head %d below acknowledged %d", round, stream, head, acked[stream])
			}
			got, err := s.ReadRange("o", stream, 1, 0, 0)
			if err != nil || uint64(len(got)) != head {
				t.Fatalf("round %d: %s: read %d messages, head %d: %v", round, stream, len(got), head, err)
			}
			for j, m := range got {
				if m.Seq != uint64(j+1) || m.HLC != m.Seq || !bytes.Equal(m.Payload, payload("o", stream, m.Seq, 1+int(m.Seq%7)*1000)) {
					t.Fatalf("round %d: %s message %d wrong (seq %d, %d bytes)", round, stream, j+1, m.Seq, len(m.Payload))
				}
			}
			if a := s.Ack("o", stream, "applied"); a != head {
				t.Errorf("round %d: %s ack %d, head %d: not atomic", round, stream, a, head)
			}
			v, err := s.AppGet("crash", []byte(stream))
			if head > 0 && (err != nil || string(v) != strconv.FormatUint(head, 10)) {
				t.Errorf("round %d: %s app key %q (%v), head %d: not atomic", round, stream, v, err, head)
			}
			t.Logf("round %d: %s head %d, acknowledged %d", round, stream, head, acked[stream])
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// runCrashChild starts a writer child and kills it once at least minTotal
// writes have been acknowledged in total (or after a deadline), recording the
// highest acknowledged seq per stream in acked.
func runCrashChild(t *testing.T, dir string, acked map[string]uint64, minTotal int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, v := range acked {
		total += int(v)
	}
	deadline := time.Now().Add(20 * time.Second)
	sc := bufio.NewScanner(out)
	for total < minTotal && time.Now().Before(deadline) && sc.Scan() {
		stream, seqText, ok := strings.Cut(sc.Text(), " ")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		if !ok || err != nil {
			t.Fatalf("bad child line %q", sc.Text())
		}
		acked[stream] = max(acked[stream], seq)
		total++
	}
	// Kill while the child is still writing: the goroutines are mid-Write.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Lines written before the kill are acknowledged too.
	for sc.Scan() {
		stream, seqText, _ := strings.Cut(sc.Text(), " ")
		if seq, err := strconv.ParseUint(seqText, 10, 64); err == nil {
			acked[stream] = max(acked[stream], seq)
		}
	}
	_ = cmd.Wait()
	if total < minTotal {
		t.Fatalf("child acknowledged only %d writes; stderr:\n%s", total, stderr.String())
	}
}
