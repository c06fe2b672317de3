package stpeer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/wan"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncthingBinary is the binary the tests run: $STPEER_SYNCTHING, or bin/syncthing
// at the repository root as test/peers/syncthing builds it.
func syncthingBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("STPEER_SYNCTHING")
	if bin == "" {
		bin = filepath.Join("..", "..", "..", "..", "bin", "syncthing")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Skipf("no syncthing binary at %s (build it: cd test/peers/syncthing && go build -tags noassets -o ../../../bin/syncthing github.com/syncthing/syncthing/cmd/syncthing): %v", abs, err)
	}
	return abs
}

const testTopology = `
name: stpeer-test
sites: [a, b, c]
rtt_ms:
  a: {b: 4, c: 8}
  b: {c: 6}
`

// lineLog writes each line to t.Log.
type lineLog struct{ t *testing.T }

func (l lineLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestCheckpointAndEdit writes a 20 MiB file at a, waits until b and c have
// it, rewrites 10% of it and checks that the second sync crossed the WAN
// in far fewer bytes than the file.
func TestCheckpointAndEdit(t *testing.T) {
	bin := syncthingBinary(t)
	topo, err := wan.ParseTopology("stpeer-test", []byte(testTopology))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	begin := time.Now()
	c, err := Start(ctx, Options{
		Binary:    bin,
		Dir:       t.TempDir(),
		Topology:  topo,
		Bandwidth: 20 * wan.MBPerSecond,
		Origin:    "a",
		Log:       lineLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("3 instances up and connected in %v", time.Since(begin).Round(time.Millisecond))

	const size = 20 << 20
	data := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(data)
	file := filepath.Join(c.FolderPath("a"), "ckpt.bin")

	// round writes data at a, scans, waits at b and c and returns the
	// bytes every link carried meanwhile.
	round := func(name string) int64 {
		t.Helper()
		before, err := c.WireBytes()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"ckpt.bin": sum(data)}
		start := time.Now()
		if err := c.Scan(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		scanned := time.Since(start)
		for _, site := range []string{"b", "c"} {
			at, err := c.WaitInSync(ctx, site, want)
			if err != nil {
				t.Fatal(err)
			}
			if at.IsZero() {
				t.Fatalf("%s: %s matched before any ItemFinished event", name, site)
			}
			t.Logf("%s: in sync at %s %v after the scan began (scan took %v)", name, site, at.Sub(start).Round(time.Millisecond), scanned.Round(time.Millisecond))
		}
		after, err := c.WireBytes()
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for l, n := range after {
			d := n - before[l]
			total += d
			t.Logf("%s: %s->%s carried %d bytes", name, l.From, l.To, d)
		}
		for _, site := range []string{"b", "c"} {
			conns, err := c.Connections(ctx, site)
			if err != nil {
				t.Fatal(err)
			}
			for peer, conn := range conns {
				t.Logf("%s: syncthing at %s counts in=%d out=%d bytes with %s since start", name, site, conn.InBytesTotal, conn.OutBytesTotal, peer)
			}
		}
		t.Logf("%s: %d bytes on the wire in all", name, total)
		return total
	}

	first := round("checkpoint")
	if first < 2*size {
		t.Errorf("checkpoint: %d bytes on the wire, less than the %d that two copies of the file need: did traffic bypass the emulated links?", first, 2*size)
	}

	// Rewrite 10%: eight 256 KiB stretches spread over the file, aligned
	// to Syncthing's 128 KiB blocks.
	edited := bytes.Clone(data)
	for i := range 8 {
		off := i * (size / 8)
		_, _ = rng.Read(edited[off : off+256<<10])
	}
	data = edited
	second := round("edit")
	if second > size/4 {
		t.Errorf("edit: %d bytes on the wire for a 10%% change of %d bytes; want well under %d", second, size, size/4)
	}
}
