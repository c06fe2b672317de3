package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir) // never returns
	}
	goleak.VerifyTestMain(m)
}

func openTest(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, Logger: testhelp.Logger(t, "storage")})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func payload(origin, stream string, seq uint64, n int) []byte {
	p := make([]byte, n)
	seed := fmt.Sprintf("%s/%s/%d|", origin, stream, seq)
	for i := range p {
		p[i] = seed[i%len(seed)]
	}
	return p
}

func msgs(origin, stream string, from, to uint64, size int) []Message {
	var out []Message
	for s := from; s <= to; s++ {
		out = append(out, Message{Seq: s, HLC: s*1000 + 7, Payload: payload(origin, stream, s, size)})
	}
	return out
}

func TestConfigValidateReportsEveryField(t *testing.T) {
	err := Config{MaxGroupBytes: -1, MaxGroupRequests: -2, CacheSize: -3, MemTableSize: 2 << 30}.Validate()
	if err == nil {
		t.Fatal("want error")
	}
	for _, field := range []string{"Dir", "MaxGroupBytes: -1", "MaxGroupRequests: -2", "CacheSize: -3", "MemTableSize: 2147483648"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %q", err, field)
		}
	}
	if err := (Config{Dir: "x"}).Validate(); err != nil {
		t.Errorf("minimal config: %v", err)
	}
	if _, err := Open(Config{}); err == nil {
		t.Error("Open accepted a config without Dir")
	}
}

func TestKeysOrderAndSeparation(t *testing.T) {
	// Seqs order numerically, across byte boundaries.
	seqs := []uint64{1, 2, 255, 256, 65535, 65536, 1 << 40}
	for i := 1; i < len(seqs); i++ {
		if bytes.Compare(msgKey("o", "s", seqs[i-1]), msgKey("o", "s", seqs[i])) >= 0 {
			t.Errorf("key of %d not below key of %d", seqs[i-1], seqs[i])
		}
	}
	// Concatenations that would collide without length prefixes do not.
	a, b := streamPrefix(prefixMsg, "a", "bc"), streamPrefix(prefixMsg, "ab", "c")
	if bytes.HasPrefix(a, b) || bytes.HasPrefix(b, a) {
		t.Errorf("prefixes %q and %q overlap", a, b)
	}
	o, s, rest, ok := decodeStreamKey(ackKey("eu-west-1", "kv", "applied"))
	if !ok || o != "eu-west-1" || s != "kv" || string(rest) != "applied" {
		t.Errorf("decode ack key: %q %q %q %v", o, s, rest, ok)
	}
	if got := PrefixEnd([]byte{1, 0xff}); !bytes.Equal(got, []byte{2}) {
		t.Errorf("prefixEnd = %v", got)
	}
}

func TestAppendAndReadRangeByteIdentical(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := context.Background()
	want := msgs("us-east-1", "kv", 1, 10, 100)
	want[3].Payload = nil // empty payloads survive too
	if err := s.Append(ctx, "us-east-1", "kv", want...); err != nil {
		t.Fatal(err)
	}
	if h := s.Head("us-east-1", "kv"); h != 10 {
		t.Fatalf("head = %d, want 10", h)
	}
	got, err := s.ReadRange("us-east-1", "kv", 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("read %d messages, want 10", len(got))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].HLC != want[i].HLC || !bytes.Equal(got[i].Payload, want[i].Payload) {
			t.Errorf("message %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	cases := []struct {
		from          uint64
		count, bytes  int
		first, number int
	}{
		{from: 3, count: 4, first: 3, number: 4},
		{from: 8, count: 100, first: 8, number: 3},
		{from: 1, bytes: 250, first: 1, number: 2}, // 100 + 100 fit, the third does not
		{from: 1, bytes: 10, first: 1, number: 1},  // always at least one
		{from: 4, bytes: 100, first: 4, number: 2}, // message 4 is empty
		{from: 11, count: 5, first: 0, number: 0},  // beyond head
		{from: 10, count: 1, bytes: 1, first: 10, number: 1},
	}
	for _, c := range cases {
		got, err := s.ReadRange("us-east-1", "kv", c.from, c.count, c.bytes)
		if err != nil {
			t.Errorf("read from %d: %v", c.from, err)
			continue
		}
		if len(got) != c.number || (c.number > 0 && got[0].Seq != uint64(c.first)) {
			t.Errorf("read from %d count %d bytes %d: got %d messages starting %v", c.from, c.count, c.bytes, len(got), got)
		}
	}
	if _, err := s.ReadRange("us-east-1", "kv", 0, 1, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("read from 0: %v, want ErrInvalid", err)
	}
	if got, err := s.ReadRange("us-east-1", "other", 1, 1, 0); err != nil || len(got) != 0 {
		t.Errorf("read unknown stream: %v %v", got, err)
	}
}

func TestWriteRejectsGapsAndDuplicatesAtomically(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := context.Background()
	if err := s.Append(ctx, "o", "s", msgs("o", "s", 1, 3, 8)...); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		b    func(*Batch)
		want error
	}{
		{"gap", func(b *Batch) { b.Append("o", "s", msgs("o", "s", 5, 5, 8)...) }, ErrSeqGap},
		{"duplicate", func(b *Batch) { b.Append("o", "s", msgs("o", "s", 3, 4, 8)...) }, ErrSeqGap},
		{"not consecutive", func(b *Batch) {
			b.Append("o", "s", Message{Seq: 4}, Message{Seq: 6})
		}, ErrSeqGap},
		{"new stream not at 1", func(b *Batch) { b.Append("o", "new", Message{Seq: 2}) }, ErrSeqGap},
		{"seq 0", func(b *Batch) { b.Append("o", "s", Message{Seq: 0}) }, ErrInvalid},
		{"empty origin", func(b *Batch) { b.Append("", "s", Message{Seq: 4}) }, ErrInvalid},
		{"long stream", func(b *Batch) { b.Append("o", strings.Repeat("x", 256), Message{Seq: 1}) }, ErrInvalid},
		{"truncate beyond head", func(b *Batch) { b.Truncate("o", "s", 9) }, ErrInvalid},
	}
	for _, c := range bad {
		var b Batch
		// Valid changes in the same batch must not be written either.
		b.Append("o", "other", Message{Seq: 1, Payload: []byte("x")})
		b.AppSet("app", []byte(c.name), []byte("v"))
		b.SetAck("o", "s", "applied", 3)
		c.b(&b)
		if err := s.Write(ctx, &b); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if _, err := s.AppGet("app", []byte(c.name)); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: app key of rejected batch: %v", c.name, err)
		}
	}
	if h := s.Head("o", "other"); h != 0 {
		t.Errorf("rejected batches appended to other stream: head %d", h)
	}
	if a := s.Ack("o", "s", "applied"); a != 0 {
		t.Errorf("rejected batches set ack %d", a)
	}
	// The stream is intact and continues at 4.
	if err := s.Append(ctx, "o", "s", msgs("o", "s", 4, 4, 8)...); err != nil {
		t.Fatalf("continue after rejected writes: %v", err)
	}
	// Several appends to one stream in one batch chain.
	var b Batch
	b.Append("o", "s", msgs("o", "s", 5, 6, 8)...)
	b.Append("o", "s", msgs("o", "s", 7, 7, 8)...)
	if err := s.Write(ctx, &b); err != nil {
		t.Fatalf("chained appends: %v", err)
	}
	if h := s.Head("o", "s"); h != 7 {
		t.Errorf("head = %d, want 7", h)
	}
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	// Three appends, three blocks: 1-6, 7-12, 13-20.
	for _, r := range [][2]uint64{{1, 6}, {7, 12}, {13, 20}} {
		if err := s.Append(ctx, "o", "s", msgs("o", "s", r[0], r[1], 16)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Truncate(ctx, "o", "s", 12); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRange("o", "s", 12, 0, 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("read truncated seq: %v", err)
	}
	got, err := s.ReadRange("o", "s", 13, 0, 0)
	if err != nil || len(got) != 8 || got[0].Seq != 13 {
		t.Fatalf("read after truncation: %d messages, %v", len(got), err)
	}
	// Truncating lower again is a no-op, not an error.
	if err := s.Truncate(ctx, "o", "s", 5); err != nil {
		t.Errorf("truncate below truncation point: %v", err)
	}
	// The blocks are really gone: scan the raw message space.
	n := 0
	if err := s.scan(msgKey("o", "s", 0), msgKey("o", "s", 100), func(k, v []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d blocks left, want 1", n)
	}
	// Truncating into a block keeps the block but hides what it truncated.
	if err := s.Truncate(ctx, "o", "s", 15); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRange("o", "s", 15, 0, 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("read seq truncated inside a block: %v", err)
	}
	if got, err := s.ReadRange("o", "s", 16, 2, 0); err != nil || len(got) != 2 || got[0].Seq != 16 || got[1].Seq != 17 {
		t.Fatalf("read inside a truncated block: %d messages, %v", len(got), err)
	}
	// Truncate everything; the head stays, numbering continues.
	if err := s.Truncate(ctx, "o", "s", 20); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	if h := s.Head("o", "s"); h != 20 {
		t.Errorf("head after full truncation and reopen = %d, want 20", h)
	}
	if _, err := s.ReadRange("o", "s", 20, 0, 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("read after full truncation: %v", err)
	}
	if err := s.Append(ctx, "o", "s", msgs("o", "s", 21, 21, 4)...); err != nil {
		t.Fatalf("append after full truncation: %v", err)
	}
	if got, err := s.ReadRange("o", "s", 21, 0, 0); err != nil || len(got) != 1 {
		t.Errorf("read 21: %v %v", got, err)
	}
}

func TestReopenRecoversEveryStream(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	var b Batch
	b.Append("us-east-1", "kv", msgs("us-east-1", "kv", 1, 5, 10)...)
	b.Append("eu-west-1", "kv", msgs("eu-west-1", "kv", 1, 3, 10)...)
	b.Append("eu-west-1", "topic/jobs", msgs("eu-west-1", "topic/jobs", 1, 7, 10)...)
	b.SetAck("eu-west-1", "kv", "applied", 2)
	b.SetAck("ap-south-1", "kv", "verified", 9) // acks alone also make a stream known
	b.SetMeta("site", []byte("us-east-1"))
	b.AppSet("kv", []byte("job/1"), []byte("running"))
	if err := s.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(ctx, "eu-west-1", "topic/jobs", 4); err != nil {
		t.Fatal(err)
	}
	before := s.Streams()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.ReadRange("us-east-1", "kv", 1, 1, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if err := s.Append(ctx, "us-east-1", "kv", msgs("us-east-1", "kv", 6, 6, 1)...); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v", err)
	}

	s = openTest(t, dir)
	after := s.Streams()
	want := []StreamInfo{
		{Origin: "ap-south-1", Stream: "kv", Acks: map[string]uint64{"verified": 9}},
		{Origin: "eu-west-1", Stream: "kv", Head: 3, Acks: map[string]uint64{"applied": 2}},
		{Origin: "eu-west-1", Stream: "topic/jobs", Head: 7, Truncated: 4},
		{Origin: "us-east-1", Stream: "kv", Head: 5},
	}
	if fmt.Sprint(after) != fmt.Sprint(want) || fmt.Sprint(before) != fmt.Sprint(want) {
		t.Errorf("streams\nbefore %v\nafter  %v\nwant   %v", before, after, want)
	}
	if v, err := s.GetMeta("site"); err != nil || string(v) != "us-east-1" {
		t.Errorf("meta: %q %v", v, err)
	}
	if v, err := s.AppGet("kv", []byte("job/1")); err != nil || string(v) != "running" {
		t.Errorf("app: %q %v", v, err)
	}
	got, err := s.ReadRange("eu-west-1", "topic/jobs", 5, 0, 0)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2].Payload, payload("eu-west-1", "topic/jobs", 7, 10)) {
		t.Errorf("read after reopen: %v %v", got, err)
	}
	if err := s.Append(ctx, "us-east-1", "kv", msgs("us-east-1", "kv", 6, 6, 1)...); err != nil {
		t.Errorf("numbering does not continue after reopen: %v", err)
	}
}

func TestAcksOnlyGrow(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	for _, seq := range []uint64{5, 3, 9, 1} {
		var b Batch
		b.SetAck("o", "s", "applied", seq)
		if err := s.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	if a := s.Ack("o", "s", "applied"); a != 9 {
		t.Errorf("ack = %d, want 9", a)
	}
	s.Close()
	s = openTest(t, dir)
	if a := s.Ack("o", "s", "applied"); a != 9 {
		t.Errorf("ack after reopen = %d, want 9", a)
	}
}

func TestAppNamespace(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := context.Background()
	var b Batch
	var key []byte // one buffer for every key: AppSet copies keys
	for _, k := range []string{"a", "b/1", "b/2", "b/3", "c"} {
		key = append(key[:0], k...)
		b.AppSet("kv", key, []byte("v-"+k))
	}
	b.AppSet("pubsub", []byte("b/9"), []byte("other namespace"))
	b.AppSet("kv", []byte{0xff, 0xff}, []byte("high"))
	if err := s.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	scan := func(f func(fn func(k, v []byte) error) error) string {
		var out []string
		if err := f(func(k, v []byte) error { out = append(out, fmt.Sprintf("%s=%s", k, v)); return nil }); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, " ")
	}
	got := scan(func(fn func(k, v []byte) error) error { return s.AppScanPrefix("kv", []byte("b/"), fn) })
	if got != "b/1=v-b/1 b/2=v-b/2 b/3=v-b/3" {
		t.Errorf("prefix scan: %s", got)
	}
	got = scan(func(fn func(k, v []byte) error) error { return s.AppScan("kv", []byte("b/2"), nil, fn) })
	if got != "b/2=v-b/2 b/3=v-b/3 c=v-c \xff\xff=high" {
		t.Errorf("open-ended scan: %q", got)
	}
	got = scan(func(fn func(k, v []byte) error) error { return s.AppScanPrefix("kv", []byte{0xff}, fn) })
	if got != "\xff\xff=high" {
		t.Errorf("0xff prefix scan: %q", got)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.AppScan("kv", nil, nil, func(k, v []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("scan stop: %v after %d", err, n)
	}

	b.Reset()
	b.AppDelete("kv", []byte("a"))
	b.AppDeleteRange("kv", []byte("b/2"), []byte("c"))
	if err := s.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	got = scan(func(fn func(k, v []byte) error) error { return s.AppScan("kv", nil, nil, fn) })
	if got != "b/1=v-b/1 c=v-c \xff\xff=high" {
		t.Errorf("after deletes: %q", got)
	}
	b.Reset()
	b.AppDeleteRange("kv", nil, nil)
	if err := s.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	got = scan(func(fn func(k, v []byte) error) error { return s.AppScan("kv", nil, nil, fn) })
	if got != "" {
		t.Errorf("after deleting the namespace: %q", got)
	}
	if v, err := s.AppGet("pubsub", []byte("b/9")); err != nil || string(v) != "other namespace" {
		t.Errorf("other namespace touched: %q %v", v, err)
	}
}

func TestWriteCanceledContextWritesNothing(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Append(ctx, "o", "s", Message{Seq: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	if h := s.Head("o", "s"); h != 0 {
		t.Errorf("head %d after canceled write", h)
	}
}

// TestConcurrentWritersGroupCommit runs writers on their own streams and on
// one shared stream (taking seqs under a lock, as a driver would) and checks
// that everything is there, in order, and that Writes were combined.
func TestConcurrentWritersGroupCommit(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := Open(Config{Dir: t.TempDir(), Logger: testhelp.Logger(t, "storage"), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const writers, perWriter = 8, 300
	var wg sync.WaitGroup
	var sharedMu sync.Mutex
	var sharedNext uint64 = 1
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("w%d", w)
			for i := uint64(1); i <= perWriter; i++ {
				var b Batch
				b.Append("o", stream, msgs("o", stream, i, i, 64)...)
				b.SetAck("o", stream, "applied", i)
				if err := s.Write(ctx, &b); err != nil {
					errs <- err
					return
				}
				// The shared stream: seq assignment and the Write in one
				// critical section keeps appends in seq order.
				sharedMu.Lock()
				err := s.Append(ctx, "o", "shared", msgs("o", "shared", sharedNext, sharedNext, 32)...)
				sharedNext++
				sharedMu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := 0; w < writers; w++ {
		stream := fmt.Sprintf("w%d", w)
		got, err := s.ReadRange("o", stream, 1, 0, 0)
		if err != nil || len(got) != perWriter {
			t.Fatalf("%s: %d messages, %v", stream, len(got), err)
		}
		for i, m := range got {
			if m.Seq != uint64(i+1) || !bytes.Equal(m.Payload, payload("o", stream, m.Seq, 64)) {
				t.Fatalf("%s message %d wrong: %+v", stream, i, m)
			}
		}
		if a := s.Ack("o", stream, "applied"); a != perWriter {
			t.Errorf("%s ack %d", stream, a)
		}
	}
	if h := s.Head("o", "shared"); h != writers*perWriter {
		t.Errorf("shared head %d", h)
	}
	writes := testutil.ToFloat64(s.metrics.writes)
	commits := testutil.ToFloat64(s.metrics.commits)
	syncs := s.walSyncs()
	t.Logf("%v writes in %v pebble commits and %d WAL fsyncs", writes, commits, syncs)
	if writes != 2*writers*perWriter {
		t.Errorf("writes metric %v", writes)
	}
	if commits > writes || syncs == 0 || float64(syncs) >= writes {
		t.Errorf("no group commit: %v commits and %d fsyncs for %v writes", commits, syncs, writes)
	}
	if n, err := testutil.GatherAndCount(reg, "stabilizer_storage_appended_messages_total"); err != nil || n != 1 {
		t.Errorf("metric not registered: %d %v", n, err)
	}
	// pebble's fsyncs, in seconds: as many as walSyncs counts, each well
	// under a minute.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "stabilizer_storage_wal_fsync_seconds" {
			continue
		}
		found = true
		h := mf.GetMetric()[0].GetHistogram()
		if n := h.GetSampleCount(); n == 0 || n > s.walSyncs() || h.GetSampleSum() <= 0 || h.GetSampleSum() > 60*float64(n) {
			t.Errorf("wal fsync histogram: %d fsyncs (walSyncs %d), %v s", n, s.walSyncs(), h.GetSampleSum())
		}
	}
	if !found {
		t.Error("stabilizer_storage_wal_fsync_seconds not exported")
	}
}

// TestGroupLimitsAndAbandonedRequests drives the queue directly: requests
// queued behind a leader are grouped within the limits, and abandoned ones
// are skipped without being written.
func TestGroupLimitsAndAbandonedRequests(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), Logger: testhelp.Logger(t, "storage"), MaxGroupRequests: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var reqs []*writeReq
	for i := uint64(1); i <= 5; i++ {
		var b Batch
		b.Append("o", "s", Message{Seq: i})
		r := &writeReq{b: &b, done: make(chan error, 1), lead: make(chan struct{}, 1)}
		reqs = append(reqs, r)
	}
	reqs[1].state.Store(reqAbandoned)
	s.mu.Lock()
	s.mu.queue = append(s.mu.queue, reqs...)
	s.mu.leading = true
	reqs[0].state.Store(reqPromoted)
	s.mu.Unlock()

	s.lead() // group: 1, (2 dropped), 3, 4 — seq 3 no longer continues the head
	if err := <-reqs[0].done; err != nil {
		t.Errorf("req 1: %v", err)
	}
	if err := <-reqs[2].done; !errors.Is(err, ErrSeqGap) {
		t.Errorf("req 3 after abandoned 2: %v, want ErrSeqGap", err)
	}
	if err := <-reqs[3].done; !errors.Is(err, ErrSeqGap) {
		t.Errorf("req 4: %v, want ErrSeqGap", err)
	}
	select {
	case <-reqs[4].lead:
	default:
		t.Fatal("req 5 was not promoted to lead")
	}
	if st := reqs[4].state.Load(); st != reqPromoted {
		t.Fatalf("req 5 state %d", st)
	}
	s.lead()
	if err := <-reqs[4].done; !errors.Is(err, ErrSeqGap) {
		t.Errorf("req 5: %v", err)
	}
	s.mu.Lock()
	leading, queued := s.mu.leading, len(s.mu.queue)
	s.mu.Unlock()
	if leading || queued != 0 {
		t.Errorf("after draining: leading %v, %d queued", leading, queued)
	}
	if h := s.Head("o", "s"); h != 1 {
		t.Errorf("head %d, want 1", h)
	}
	select {
	case err := <-reqs[1].done:
		t.Errorf("abandoned request got an outcome: %v", err)
	default:
	}
}

// TestLargeMessagesSurviveFlushAndReopen covers payloads that pebble moves
// to blob files when it flushes (value separation) and reads back after a
// reopen.
func TestLargeMessagesSurviveFlushAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	want := msgs("o", "big", 1, 40, 64<<10)
	if err := s.Append(ctx, "o", "big", want...); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(ctx, "o", "big", 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	got, err := s.ReadRange("o", "big", 11, 0, 0)
	if err != nil || len(got) != 30 {
		t.Fatalf("read %d messages: %v", len(got), err)
	}
	for i, m := range got {
		w := want[10+i]
		if m.Seq != w.Seq || m.HLC != w.HLC || !bytes.Equal(m.Payload, w.Payload) {
			t.Fatalf("message %d differs", w.Seq)
		}
	}
	// maxBytes stops after whole messages.
	got, err = s.ReadRange("o", "big", 11, 0, 3*(64<<10)+1)
	if err != nil || len(got) != 3 {
		t.Errorf("byte-limited read: %d messages, %v", len(got), err)
	}
}

func TestWriteNoSync(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	var b Batch
	b.AppSet("node", []byte("f"), []byte("1"))
	if err := s.WriteNoSync(&b); err != nil {
		t.Fatal(err)
	}
	if v, err := s.AppGet("node", []byte("f")); err != nil || string(v) != "1" {
		t.Fatalf("read after unsynced write: %q %v", v, err)
	}
	// Stream appends and acks must be synced.
	for _, fill := range []func(*Batch){
		func(b *Batch) { b.Append("a", "s", Message{Seq: 1}) },
		func(b *Batch) { b.SetAck("a", "s", "applied", 1) },
		func(b *Batch) { b.Truncate("a", "s", 0) },
	} {
		var b Batch
		fill(&b)
		if err := s.WriteNoSync(&b); !errors.Is(err, ErrInvalid) {
			t.Fatalf("unsynced write of %+v: %v, want ErrInvalid", b, err)
		}
	}
	// A clean close keeps what was written without sync.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteNoSync(&b); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	s = openTest(t, dir)
	if v, err := s.AppGet("node", []byte("f")); err != nil || string(v) != "1" {
		t.Fatalf("after reopening: %q %v", v, err)
	}
}

// TestAppScanSkip reads the first key of each run of keys that share a
// first letter, skipping the rest of each run; a next key that is not
// ahead of the current one continues with the following key.
func TestAppScanSkip(t *testing.T) {
	s := openTest(t, t.TempDir())
	var b Batch
	for _, k := range []string{"a1", "a2", "a3", "b1", "b2", "c1", "d1"} {
		b.AppSet("kv", []byte(k), []byte("v"))
	}
	b.AppSet("other", []byte("b9"), []byte("other namespace"))
	if err := s.Write(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	var seen []string
	err := s.AppScanSkip("kv", nil, []byte("d"), func(k, v []byte) ([]byte, error) {
		seen = append(seen, string(k))
		if k[0] == 'b' {
			return []byte("a"), nil // behind: ignored
		}
		return []byte{k[0] + 1}, nil
	})
	if got := strings.Join(seen, " "); err != nil || got != "a1 b1 b2 c1" {
		t.Errorf("scan saw %q (%v), want \"a1 b1 b2 c1\"", got, err)
	}
}

// TestBlocks: one append of many messages is stored as blocks of about
// blockBytes, and reads that start, stop or run out of budget inside a
// block return exactly the messages asked for.
func TestBlocks(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := context.Background()
	// 100 messages of 1000 bytes: blocks of 32 or 33.
	if err := s.Append(ctx, "o", "s", msgs("o", "s", 1, 100, 1000)...); err != nil {
		t.Fatal(err)
	}
	blocks := 0
	if err := s.scan(msgKey("o", "s", 0), msgKey("o", "s", 1000), func(k, v []byte) error { blocks++; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := 100 / (blockBytes / 1000); blocks != want && blocks != want+1 {
		t.Errorf("%d blocks, want about %d", blocks, want)
	}
	for _, c := range []struct {
		from            uint64
		count, maxBytes int
		first, last     uint64
	}{
		{1, 0, 0, 1, 100},
		{40, 0, 0, 40, 100},       // from inside a block
		{40, 3, 0, 40, 42},        // to inside the same block
		{30, 10, 0, 30, 39},       // across a block boundary
		{50, 0, 2500, 50, 51},     // out of bytes inside a block
		{100, 5, 0, 100, 100},     // the last message
		{10, 0, 1, 10, 10},        // at least one message, whatever the budget
		{64, 40, 10000, 64, 73},   // bytes bound before count
		{95, 40, 100000, 95, 100}, // head bounds before count
	} {
		got, err := s.ReadRange("o", "s", c.from, c.count, c.maxBytes)
		if err != nil || len(got) == 0 || got[0].Seq != c.first || got[len(got)-1].Seq != c.last || uint64(len(got)) != c.last-c.first+1 {
			t.Errorf("ReadRange(%d, %d, %d): %d messages (%v), want %d..%d", c.from, c.count, c.maxBytes, len(got), err, c.first, c.last)
			continue
		}
		for _, m := range got {
			if m.HLC != m.Seq*1000+7 || !bytes.Equal(m.Payload, payload("o", "s", m.Seq, 1000)) {
				t.Fatalf("message %d read back wrong", m.Seq)
			}
		}
	}
}

// TestReadsMessagesOfTheOldLayout: a store written before blocks holds one
// value per message; it reads back, and new appends continue it in blocks.
func TestReadsMessagesOfTheOldLayout(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	old := msgs("o", "s", 1, 5, 100)
	pb := s.db.NewBatch()
	for _, m := range old {
		_ = pb.Set(msgKey("o", "s", m.Seq), encodeMsgValue(m), nil)
	}
	_ = pb.Set(streamStateKey("o", "s"), encodeStreamState(streamState{head: 5}), nil)
	if err := pb.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	if err := s.Append(context.Background(), "o", "s", msgs("o", "s", 6, 9, 100)...); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadRange("o", "s", 3, 0, 0)
	if err != nil || len(got) != 7 {
		t.Fatalf("read across layouts: %d messages, %v", len(got), err)
	}
	for i, m := range got {
		if m.Seq != uint64(3+i) || !bytes.Equal(m.Payload, payload("o", "s", m.Seq, 100)) {
			t.Fatalf("message %d of the read: seq %d, wrong bytes", i, m.Seq)
		}
	}
}
