package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

// TestPubSubThroughBinaries runs a tiny pub/sub bench through benchpeers:
// NATS's loopback phases (throughput, and memory with a stalled
// subscriber), so that a change to benchpeers's jobs or their JSON fails
// here rather than in a 5-minute run, and ours through stabilizerd. The
// WAN phases need root for NATS's network namespaces and are left out.
func TestPubSubThroughBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds benchpeers and runs NATS servers")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/benchpeers")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	build = exec.Command("go", "build", "-o", bin+"/", "./cmd/stabilizerd")
	build.Dir = filepath.Join("..", "..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stabilizerd: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	o := newPubSubCmdOptions()
	o.topology, o.out = "ec2-3", t.TempDir()
	o.publishes, o.degradeWindow = 1, time.Second
	o.tputWarm, o.tputWindow, o.inflight, o.bytes = 100*time.Millisecond, 500*time.Millisecond, []int{8}, 64
	o.stallBefore, o.stall, o.stallAfter, o.rssEvery = 300*time.Millisecond, time.Second, 300*time.Millisecond, 100*time.Millisecond
	o.skip = map[string]bool{"wan": true}
	o.progress = testhelp.Logger(t, "wanbench").StandardWriter(&hclog.StandardLoggerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := runPubSub(ctx, o); err != nil {
		t.Fatal(err)
	}
	res, err := loadPSResults(o.out)
	if err != nil {
		t.Fatal(err)
	}
	tput := res.find(psTput, sysNATS, predNATS, "loopback", "", "", "", 8)
	if tput == nil || !tput.measured() || tput.OpsPerS <= 0 || len(tput.DeliveredPerS) != 3 {
		t.Fatalf("NATS throughput row: %+v", tput)
	}
	mem := res.rows(psMemory, sysNATS)
	if len(mem) != 3 || !mem[0].measured() || mem[0].StallToS-mem[0].StallFromS != 1 || !strings.Contains(mem[0].Note, "stalled") {
		t.Fatalf("NATS memory rows: %+v", mem)
	}
	ours := res.find(psTput, sysOurs, predMajorityName, "loopback", "", "", "", 8)
	if ours == nil || !ours.measured() || ours.OpsPerS <= 0 || len(ours.DeliveredPerS) != 3 {
		t.Fatalf("our throughput row: %+v", ours)
	}
	b, err := os.ReadFile(filepath.Join(o.out, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| nats-jetstream | 8 |", "skipped: --skip wan"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(o.out, "work")); !os.IsNotExist(err) {
		t.Errorf("the work folder is still there: %v", err)
	}
}
