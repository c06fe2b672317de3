package stabilizer_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// fakeDisk is a filesystem of 100 GiB whose free space the test sets.
type fakeDisk struct{ free atomic.Int64 }

func (d *fakeDisk) statfs(string) (int64, int64, error) { return d.free.Load(), 100 << 30, nil }

// TestDiskFull: a site whose free space drops below its reserve refuses
// appends with ErrDiskFull, while what it appended before becomes stable at
// its peers and stays readable; it drops the data its peers send, and once
// space is back it takes appends again and gets the peers' entries.
func TestDiskFull(t *testing.T) {
	disk, plenty := &fakeDisk{}, &fakeDisk{}
	disk.free.Store(50 << 30)
	plenty.free.Store(50 << 30)
	reg := prometheus.NewRegistry()
	c := newCluster(t, func(cfg *stabilizer.Config) {
		cfg.MinFreeBytes = 1 << 30
		// Peers resend what b dropped after 200ms without progress, not 3s.
		cfg.Core.ResendTicks = 200
		if cfg.Site != "b" {
			stabilizer.SetStatfs(cfg, plenty.statfs) // none depends on the real disk
			return
		}
		stabilizer.SetStatfs(cfg, disk.statfs)
		cfg.Registerer = reg
	}, "a", "b", "c")
	ctx := stabilizertest.Context(t, 30*time.Second)
	a, b := c.Node("a"), c.Node("b")
	metric := func(name string) float64 { return metricValue(t, reg, name) }

	var before stabilizer.Appended
	var err error
	for i := range 10 {
		if before, err = b.Append(ctx, "log", fmt.Appendf(nil, "before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	disk.free.Store(512 << 20)
	stabilizer.CheckDisk(b)
	if st := b.DiskStatus(); !st.Full || st.Free != 512<<20 || st.Reserve != 1<<30 || st.Dir != c.Dir("b") {
		t.Fatalf("DiskStatus with 512 MiB free of a 1 GiB reserve: %v, full %v", st, st.Full)
	}
	_, err = b.Append(ctx, "log", []byte("refused"))
	if !errors.Is(err, stabilizer.ErrDiskFull) {
		t.Fatalf("Append on a full disk: %v, want ErrDiskFull", err)
	}
	for _, want := range []string{`append to "log"`, "site b", "512.0 MiB free under " + c.Dir("b"), "reserve 1.0 GiB", "disk full"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := b.AppendBatch(ctx, "log", [][]byte{[]byte("x"), []byte("y")}); !errors.Is(err, stabilizer.ErrDiskFull) {
		t.Fatalf("AppendBatch on a full disk: %v, want ErrDiskFull", err)
	}
	if got := metric("stabilizer_disk_full_refusals_total"); got != 3 {
		t.Errorf("stabilizer_disk_full_refusals_total = %v, want 3", got)
	}
	if metric("stabilizer_disk_full") != 1 || metric("stabilizer_disk_free_bytes") != 512<<20 {
		t.Errorf("disk gauges: full %v, free %v", metric("stabilizer_disk_full"), metric("stabilizer_disk_free_bytes"))
	}

	// What b appended before goes on: persisted everywhere, b taking the
	// acks and storing its frontier, and readable at b.
	if err := b.WaitFor(ctx, before.Stream, "all", before.Seq); err != nil {
		t.Fatalf("b's entries appended before it was full: %v", err)
	}
	for seq := uint64(1); seq <= before.Seq; seq++ {
		e, err := b.ReadEntry(ctx, before.Stream, seq)
		if want := fmt.Sprintf("before-%d", seq-1); err != nil || string(e.Payload) != want {
			t.Fatalf("b reads seq %d while full: %q, %v; want %q", seq, e.Payload, err, want)
		}
	}

	// a's entries reach c but not b, which drops them.
	var fromA stabilizer.Appended
	for i := range 5 {
		if fromA, err = a.Append(ctx, "log", fmt.Appendf(nil, "a-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.WaitFor(ctx, fromA.Stream, `persisted("c")`, fromA.Seq); err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 10*time.Second, func() error {
		if n := metric("stabilizer_disk_full_dropped_frames_total"); n == 0 {
			return errors.New("b dropped no data frame of a's")
		}
		return nil
	})
	if f, err := a.Frontier(ctx, fromA.Stream, `persisted("b")`); err != nil || f.Seq != 0 {
		t.Fatalf("b persisted a's stream up to %d while full (%v), want 0", f.Seq, err)
	}

	// Space back: the next append looks again without waiting for the
	// guard's tick, and a's resend gets through.
	disk.free.Store(2 << 30)
	after, err := b.Append(ctx, "log", []byte("after"))
	if err != nil {
		t.Fatalf("Append once space is back: %v", err)
	}
	if st := b.DiskStatus(); st.Full {
		t.Fatalf("DiskStatus once space is back: %v, full %v", st, st.Full)
	}
	if err := b.WaitFor(ctx, fromA.Stream, "persisted(self)", fromA.Seq); err != nil {
		t.Fatalf("a's entries dropped while b was full never reached b: %v", err)
	}
	if err := a.WaitFor(ctx, after.Stream, "all", after.Seq); err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 10*time.Second, func() error {
		if n := c.app("b").count(fromA.Stream); n != 5 {
			return fmt.Errorf("b applied %d of a's 5 entries", n)
		}
		return c.app("b").err
	})
	if metric("stabilizer_disk_full") != 0 {
		t.Error("stabilizer_disk_full still 1 once space is back")
	}
}

// TestDiskGuardTicks: the guard finds the site full on its own, within a
// few of its checks, and no longer full once space is back.
func TestDiskGuardTicks(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(50 << 30)
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"a"},
		Configure: func(_ string, cfg *stabilizer.Config) { stabilizer.SetStatfs(cfg, disk.statfs) }})
	n := c.Node("a")
	if st := n.DiskStatus(); st.Full || st.Reserve != stabilizer.DefaultMinFreeBytes {
		t.Fatalf("DiskStatus with 50 GiB free: %v, full %v; want not full, reserve DefaultMinFreeBytes", st, st.Full)
	}
	for _, free := range []int64{100 << 20, 1 << 30} {
		disk.free.Store(free)
		full := free < stabilizer.DefaultMinFreeBytes
		stabilizertest.Eventually(t, 10*stabilizer.DiskCheckInterval, func() error {
			if st := n.DiskStatus(); st.Full != full || st.Free != free {
				return fmt.Errorf("with %d bytes free the guard says %v, full %v; want full %v", free, st, st.Full, full)
			}
			return nil
		})
	}
}

func TestConfigMinFreeBytes(t *testing.T) {
	cfg := stabilizer.Config{Site: "a", Schema: &frontier.Schema{Sites: []string{"a"}}, Dir: t.TempDir(), MinFreeBytes: -2}
	if _, err := stabilizer.New(cfg); err == nil || !strings.Contains(err.Error(), "stabilizer: config: MinFreeBytes: -2") {
		t.Fatalf("New with MinFreeBytes -2: %v", err)
	}
	cfg.MinFreeBytes = -1
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with MinFreeBytes -1 (off): %v", err)
	}
}

// metricValue reads the value of the one series named name in reg, a
// gauge or a counter; -1 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	return -1
}
