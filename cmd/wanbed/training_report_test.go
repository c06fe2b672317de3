package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/wan"
)

// TestResumeVerdict: resumable within 1.3 × the bound is met, over it
// missed, never resumable not measured.
func TestResumeVerdict(t *testing.T) {
	for _, c := range []struct {
		name        string
		took, bound time.Duration
		want        string
	}{
		{"under the bound", 700 * time.Millisecond, time.Second, "met"},
		{"at 1.3 × the bound", 1300 * time.Millisecond, time.Second, "met"},
		{"just over", 1301 * time.Millisecond, time.Second, "MISSED"},
		{"twice the bound", 1610 * time.Millisecond, 780 * time.Millisecond, "MISSED"},
		{"never resumable", 0, time.Second, "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := (resumeRow{step: 1, took: c.took, bound: c.bound}).verdict(); got != c.want {
				t.Fatalf("verdict = %q, want %q", got, c.want)
			}
		})
	}
}

func TestResumeSummary(t *testing.T) {
	row := func(step int, took, bound float64) resumeRow {
		return resumeRow{step: step, took: time.Duration(took * float64(time.Second)), bound: time.Duration(bound * float64(time.Second))}
	}
	for _, c := range []struct {
		name string
		rows []resumeRow
		want []string
	}{
		{"all met", []resumeRow{row(1, 0.9, 0.78), row(2, 0.7, 0.61)},
			[]string{"≤ 1.3 × its bound: MET for all 2 checkpoints; step-000001 met (0.90 s against 0.78 s, 1.15×), step-000002 met (0.70 s against 0.61 s, 1.15×)"}},
		{"one missed", []resumeRow{row(1, 1.61, 0.78), row(2, 0.7, 0.61)},
			[]string{"MISSED: met for 1 of 2 checkpoints; step-000001 missed (1.61 s against 0.78 s, 2.06×), step-000002 met"}},
		{"one never resumable", []resumeRow{row(1, 0.7, 0.78), row(2, 0, 0.61)},
			[]string{"MISSED: met for 1 of 2 checkpoints", "step-000002 not resumable there (not measured)"}},
		{"none resumable", []resumeRow{row(1, 0, 0.78)}, []string{"≤ 1.3 × its bound: not measured; step-000001 not resumable there"}},
		{"nothing committed", nil, []string{"not measured (no checkpoint committed)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := resumeSummary(c.rows, "eu-west-1")
			if !strings.HasPrefix(got, "timing target (reported, not a check): commit -> resumable in eu-west-1 ≤ 1.3 × its bound: ") {
				t.Errorf("summary %q", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("summary %q lacks %q", got, w)
				}
			}
		})
	}
}

// TestTrainingFiguresTarget prints the figures and the checks of a run
// made of events: step 1 over 1.3 × its bound, step 2 within, step 3
// never resumable. The target is marked per checkpoint and in the
// summary, and adds no PASS or FAIL line.
func TestTrainingFiguresTarget(t *testing.T) {
	topo, err := wan.Preset("ec2-3")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	events := filepath.Join(dir, "trainer.jsonl")
	l, err := openEventLog(events)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1764400000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for step, commit := range map[int]float64{1: 6, 2: 9, 3: 12} {
		l.emit(agentEvent{T: at(commit).UnixNano(), Ev: "ckpt.committed", Step: step, Bytes: 16 << 20})
		l.emit(agentEvent{T: at(commit + 0.5).UnixNano(), Ev: "ckpt.stable", Step: step})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tr := &training{o: trainingOptions{checkpoints: 3, shards: 4, shardBytes: 4 << 20}, w: &out, topo: topo,
		us: "us-east-1", eu: "eu-west-1", ap: "ap-northeast-1", bw: 25 * wan.MBPerSecond,
		procs:     map[string]*proc{"us-east-1-trainer": {name: "us-east-1-trainer", region: "us-east-1", events: events}},
		resumable: map[int]time.Time{1: at(6 + 1.61), 2: at(9 + 0.7)},
		checks:    []check{{"a", true, "fine"}, {"b", true, "fine"}}}
	// Bounds: 16 MiB and 12 MiB at 25 MB/s plus 1.5 × 69.7 ms.
	tr.printFigures()
	if err := tr.printChecks(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"TARGET ≤ 1.3×",
		"step-000001  16.0 MiB           0.50 s               -                  1.61 s  0.78 s     2.08         MISSED",
		"step-000002  12.0 MiB           0.50 s               -                  0.70 s  0.61 s     1.15            met",
		"step-000003  12.0 MiB           0.50 s               -                       -  0.61 s        -              -",
		"target (issue 26): resumable in eu-west-1 within 1.3 × the bound",
		"\nsummary: 2 of 2 checks passed; timing target (reported, not a check): commit -> resumable in eu-west-1 ≤ 1.3 × its bound: MISSED: met for 1 of 3 checkpoints; step-000001 missed (1.61 s against 0.78 s, 2.08×), step-000002 met (0.70 s against 0.61 s, 1.15×), step-000003 not resumable there (not measured)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(got, "\nPASS "); n != 2 || strings.Contains(got, "\nFAIL ") {
		t.Errorf("%d PASS lines, want the 2 checks'", n)
	}
	if t.Failed() {
		t.Log(got)
	}
}

// TestSectionPlainWhenPiped: a section title carries no escape codes when
// the output is not a terminal (make demo | tee, logs).
func TestSectionPlainWhenPiped(t *testing.T) {
	var b strings.Builder
	section(&b, "Starting")
	if strings.Contains(b.String(), "\033") || !strings.Contains(b.String(), "== Starting ==") {
		t.Fatalf("section to a buffer: %q", b.String())
	}
}

// TestLeftBehind names the folder, its size on disk and how to remove it.
func TestLeftBehind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	got := leftBehind(dir)
	if !strings.Contains(got, dir+" (3.0 MiB on disk; rm -rf "+dir+" removes it)") {
		t.Fatalf("leftBehind: %q", got)
	}
}
