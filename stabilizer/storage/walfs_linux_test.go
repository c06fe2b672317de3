package storage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestWALIsExtendedAndReplays checks that a WAL's preallocation gives it its
// size, so that a synced write does not grow the file, and that a store
// reopened on such a WAL (a zeroed tail after the last record) reads back
// what was written. TestCrashKill9KeepsAcknowledgedWrites does the same
// after SIGKILL.
func TestWALIsExtendedAndReplays(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	// Pebble preallocates from the second write of a WAL on.
	for seq := uint64(1); seq <= 3; seq++ {
		if err := s.Append(context.Background(), "us-east-1", "kv", msgs("us-east-1", "kv", seq, seq, 300)...); err != nil {
			t.Fatal(err)
		}
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no WAL in %s: %v", dir, err)
	}
	largest := int64(0)
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	if largest < 1<<20 {
		t.Errorf("largest WAL is %d bytes after three writes of 300 bytes: preallocation did not extend it", largest)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	got, err := s.ReadRange("us-east-1", "kv", 1, 0, 0)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2].Payload, payload("us-east-1", "kv", 3, 300)) {
		t.Fatalf("after reopen: %d messages, %v", len(got), err)
	}
	if err := s.Append(context.Background(), "us-east-1", "kv", msgs("us-east-1", "kv", 4, 4, 300)...); err != nil {
		t.Errorf("append after reopen: %v", err)
	}
}
