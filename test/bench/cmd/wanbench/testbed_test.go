package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

// TestCommandError: a failed command's error names it and ends with the
// last line it wrote to stderr.
func TestCommandError(t *testing.T) {
	_, err := command(io.Discard, "sh", "-c", "echo first >&2; echo 'the reason' >&2; exit 3")
	if err == nil || !strings.HasPrefix(err.Error(), "sh -c: exit status 3") || !strings.HasSuffix(err.Error(), ": the reason") {
		t.Fatalf("command error: %v", err)
	}
	out, err := command(io.Discard, "sh", "-c", "echo '[1]'")
	if err != nil || string(out) != "[1]\n" {
		t.Fatalf("command: %q %v", out, err)
	}
}

// TestStopAll: started processes log to their file and stop on SIGTERM;
// stopping what already exited is fine.
func TestStopAll(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	p, err := start("sh", log, "-c", "echo started; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	q, err := start("true", log)
	if err != nil {
		t.Fatal(err)
	}
	<-q.done
	testhelp.Eventually(t, 10*time.Second, func() error {
		if b, _ := os.ReadFile(log); !strings.Contains(string(b), "started") {
			return fmt.Errorf("log %q", b)
		}
		return nil
	})
	began := time.Now()
	stopAll([]*proc{p, q}, io.Discard)
	if !p.exited() || time.Since(began) > 10*time.Second {
		t.Fatalf("stopAll: exited %v after %v", p.exited(), time.Since(began))
	}
}

// TestBenchThroughBinaries runs a tiny bench through the real binaries:
// our KV on the ec2-3 WAN (wanbed up/down) and on loopback (stabilizerd
// genconfig, stabilizerd --config), so that a change to their flags or
// their JSON output fails here rather than in a 6-minute make bench. The
// peers need benchpeers and root, and are left out.
func TestBenchThroughBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/wanbed", "./cmd/stabilizerd")
	build.Dir = filepath.Join("..", "..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := runBench(ctx, benchOptions{topology: "ec2-3", out: out, writes: 1, warmup: 0, tputDuration: 500 * time.Millisecond,
		inflight: []int{8}, conns: []int{1}, valueBytes: 64, skip: map[string]bool{"etcd": true, "lin": true, "nats": true},
		progress: testhelp.Logger(t, "wanbench").StandardWriter(&hclog.StandardLoggerOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| majority | eu-west-1 | 1 |", "| stabilizer | majority | 8 | 1 |", "| stabilizer-unary | majority | 8 | 1 |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "work")); !os.IsNotExist(err) {
		t.Errorf("the work folder is still there: %v", err)
	}
}
