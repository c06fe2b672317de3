package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"1GiB", 1 << 30, false},
		{"256MiB", 256 << 20, false},
		{"64 KiB", 64 << 10, false},
		{"1.5GB", 1.5e9, false},
		{"1000", 1000, false},
		{"12XB", 0, true},
		{"-1MiB", 0, true},
	} {
		got, err := parseSize(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// A restarted site's log, as stabilizerd writes it.
const wipeLog = `2026-12-02T03:49:38.812Z [INFO]  ap-northeast-1.node.storage: opened: dir=/w/ap-northeast-1 streams=0
2026-12-02T03:49:39.924Z [INFO]  ap-northeast-1.node: state transfer: receiving: stream=eu-west-1/kv from=eu-west-1 needs=572 resume=false
2026-12-02T03:49:40.626Z [INFO]  ap-northeast-1.node: state transfer: progress: stream=eu-west-1/kv from=eu-west-1 percent=2.4 bytes=541403 of=23027340
2026-12-02T03:49:41.687Z [INFO]  ap-northeast-1.node: state transfer: done: stream=eu-west-1/kv from=eu-west-1 snapshot=1a6d90dc44a4ae9a position=618 keys=618 bytes=23027340 took=1.763s
2026-12-02T03:49:41.687Z [INFO]  ap-northeast-1.node: state transfer: receiving: stream=us-east-1/kv from=us-east-1 needs=572 resume=true
2026-12-02T03:49:43.279Z [WARN]  ap-northeast-1.node: state transfer: interrupted; resuming: stream=us-east-1/kv from=us-east-1 error="session down"
2026-12-02T03:49:43.280Z [INFO]  ap-northeast-1.node: state transfer: done: stream=us-east-1/kv from=us-east-1 snapshot=c55a926e5732676c position=660 keys=660 bytes=23202144 took=1.592s
`

func TestTransferPhases(t *testing.T) {
	restart := time.Date(2026, 12, 2, 3, 49, 38, 800e6, time.UTC)
	ps := transferPhases(parseTransferLines(strings.NewReader(wipeLog)), restart)
	want := []wipePhase{
		{Event: "receiving", AtS: 1.124, Stream: "eu-west-1/kv", From: "eu-west-1"},
		{Event: "done", AtS: 2.887, Stream: "eu-west-1/kv", From: "eu-west-1", Keys: 618, Bytes: 23027340, TookS: 1.763},
		{Event: "receiving", AtS: 2.887, Stream: "us-east-1/kv", From: "us-east-1", Resume: true},
		{Event: "done", AtS: 4.48, Stream: "us-east-1/kv", From: "us-east-1", Keys: 660, Bytes: 23202144, TookS: 1.592},
	}
	if len(ps) != len(want) {
		t.Fatalf("%d phases, want %d: %+v", len(ps), len(want), ps)
	}
	for i := range want {
		got := ps[i]
		got.AtS = float64(int(got.AtS*1000+0.5)) / 1000
		if got != want[i] {
			t.Errorf("phase %d = %+v, want %+v", i, got, want[i])
		}
	}
	f := filepath.Join(t.TempDir(), "site.log")
	if err := os.WriteFile(f, []byte("2026-12-02T03:40:00.000Z [INFO]  x.node: state transfer: done: stream=ap-northeast-1/kv from=x took=1s\n"+wipeLog), 0o644); err != nil {
		t.Fatal(err)
	}
	off := int64(len("2026-12-02T03:40:00.000Z [INFO]  x.node: state transfer: done: stream=ap-northeast-1/kv from=x took=1s\n"))
	if !doneFor(f, 0, []string{"eu-west-1", "us-east-1", "ap-northeast-1"}) {
		t.Error("doneFor from the start misses a stream")
	}
	if doneFor(f, off, []string{"eu-west-1", "us-east-1", "ap-northeast-1"}) {
		t.Error("doneFor counts a line before its offset")
	}
}

// wipeSynth is a wipe run's results without a cluster: reads served at
// 1.4 × bound, live writes on through the restore.
func wipeSynth() *wipeResults {
	restart := time.Unix(1764400100, 0)
	res := &wipeResults{Bench: wipeBenchName, Topology: "ec2-3", Sites: []string{"us-east-1", "eu-west-1", "ap-northeast-1"}, Site: "ap-northeast-1",
		Host: "test", Commit: "abc", Started: time.Unix(1764400000, 0), Finished: time.Unix(1764400200, 0), Bandwidth: "25MB/s", BandwidthBps: 25e6,
		StateBytes: 256 << 20, LoadedBytes: 250e6, LoadedKeys: 5000, ValueBytes: 48 << 10, LoadS: 30, AppliedS: 1, TruncatedS: 1.5, Truncated: true,
		BoundS: 10, ReadsS: 14, TransfersS: 13.5, SampleKeys: 16, LiveRate: 50, LiveBytes: 4096,
		Wire:         map[string]int64{"us-east-1->ap-northeast-1": 160e6, "eu-west-1->ap-northeast-1": 100e6, "us-east-1->eu-west-1": 1e6},
		Phases:       []wipePhase{{Event: "receiving", AtS: 1, Stream: "eu-west-1/kv", From: "eu-west-1"}, {Event: "done", AtS: 5, Stream: "eu-west-1/kv", From: "eu-west-1", Keys: 1700, Bytes: 85e6, TookS: 4}},
		Progress:     []wipeProgress{{T: 2, Streams: map[string]wipeStreamProgress{"eu-west-1/kv": {Bytes: 20e6, Total: 85e6, Source: "eu-west-1"}}}, {T: 4, Streams: map[string]wipeStreamProgress{"eu-west-1/kv": {Bytes: 80e6, Total: 85e6}}}},
		FloorsBefore: map[string][]streamFloor{"us-east-1": {{Stream: "us-east-1/kv", Head: 1700, Truncated: 1700}}},
		DiskBefore:   map[string]int64{"us-east-1": 900 << 20},
		restartAt:    restart, killAt: restart.Add(-time.Second)}
	for i := range 40 {
		at := restart.Add(time.Duration(i-20) * 500 * time.Millisecond)
		var err error
		if i == 30 {
			err = errors.New("rpc error: code = DeadlineExceeded desc = wait")
		}
		res.liveSamples = append(res.liveSamples, liveSample{at: at, lat: 90 * time.Millisecond, err: err, site: "us-east-1"})
	}
	res.liveSamples = append(res.liveSamples, liveSample{at: restart.Add(3 * time.Second), err: errMissedSlot, site: "eu-west-1"})
	res.summarizeLive()
	return res
}

func TestWipeTargets(t *testing.T) {
	res := wipeSynth()
	l := res.Live
	// 18 before the kill (two fall between the kill and the restart), 20
	// from the restart to the end of the restore at 14 s of which one
	// failed, and one slot missed; the last ack at 9.59 s.
	if l.BeforeN != 18 || l.DuringN != 19 || l.DuringSlots != 21 || l.Errors != 1 || l.Missed != 1 || l.BeforeP50ms != 90 ||
		l.MaxGapS < 4.40 || l.MaxGapS > 4.42 {
		t.Fatalf("live = %+v", l)
	}
	ts := res.evaluate()
	if len(ts) != 2 || ts[0].Status != statusMet || !strings.Contains(ts[0].Detail, "1.40×") || ts[1].Status != statusMet {
		t.Fatalf("targets: %+v", ts)
	}
	res.ReadsS = 16
	if ts := res.evaluate(); ts[0].Status != statusMissed {
		t.Fatalf("1.6 × bound: %+v", ts[0])
	}
	res.ReadsS = 0
	res.LastReadError = "Unavailable: restoring"
	if ts := res.evaluate(); ts[0].Status != statusMissed || !strings.Contains(ts[0].Detail, "restoring") {
		t.Fatalf("never served: %+v", ts[0])
	}
}

func TestWipeReport(t *testing.T) {
	dir := t.TempDir()
	if err := writeWipeOutputs(dir, wipeSynth()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| a wiped site serves stable reads again within 1.5 × (state / bandwidth) | met | 14.0 s against a bound of 10.0 s",
		"| stable reads of every origin right | **14.0 s** (1.40× bound) |",
		"| receiving | 1.0 | eu-west-1/kv | eu-west-1 | 2.0 | | | | |",
		"| done | 5.0 | eu-west-1/kv | eu-west-1 | | 1700 | 81.1 MiB | 4.0 | 21.2 |",
		"into ap-northeast-1 **248.0 MiB**",
		"![wipe-transfer](wipe-transfer.png)",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, wipePlot)); err != nil {
		t.Error(err)
	}
	res, err := loadWipeResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeWipeOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	if c, err := os.ReadFile(filepath.Join(dir, reportFile)); err != nil || string(c) != string(b) {
		t.Errorf("report from results.json differs (%v)", err)
	}
}
