package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestCheckpointIsAnInstant: a checkpoint holds a namespace and the keys
// written with it in one batch as of the checkpoint, not what came after,
// and is readable after the store closed.
func TestCheckpointIsAnInstant(t *testing.T) {
	dir := t.TempDir()
	st := openTest(t, filepath.Join(dir, "db"))
	ctx := context.Background()
	for i := range 100 {
		var b Batch
		b.AppSet("app", fmt.Appendf(nil, "k%03d", i), []byte("v1"))
		b.AppSet("pos", []byte("applied"), fmt.Appendf(nil, "%d", i))
		if err := st.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	cp := filepath.Join(dir, "cp")
	if err := st.Checkpoint(cp, "app", "pos"); err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.AppSet("app", []byte("k000"), []byte("v2"))
	b.AppSet("app", []byte("k999"), []byte("later"))
	b.AppSet("pos", []byte("applied"), []byte("100"))
	if err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	sn, err := OpenSnapshot(cp)
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	n := 0
	err = sn.AppScan("app", nil, func(k, v []byte) (bool, error) {
		if string(v) != "v1" {
			return false, fmt.Errorf("key %s = %q, want the value before the checkpoint", k, v)
		}
		n++
		return true, nil
	})
	if err != nil || n != 100 {
		t.Fatalf("scan: %d keys, %v; want 100", n, err)
	}
	var pos string
	_ = sn.AppScan("pos", nil, func(_, v []byte) (bool, error) { pos = string(v); return true, nil })
	if pos != "99" {
		t.Fatalf("position %q, want 99: the namespace and its position must be of one instant", pos)
	}
	// Resuming after a key returns what follows it only.
	var first string
	_ = sn.AppScan("app", []byte("k049"), func(k, _ []byte) (bool, error) { first = string(k); return false, nil })
	if first != "k050" {
		t.Fatalf("scan after k049 starts at %q", first)
	}
}
