package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
)

// TestInitRefusesNested: a folder inside a synced folder, or holding one,
// is refused before any site is asked: its files would go to two shares.
func TestInitRefusesNested(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	outer := e.client("outer", "us-east-1", Options{})
	cfg := Config{Sites: []string{e.sites["us-east-1"].Addr}, Share: e.share}
	inner := filepath.Join(outer.dir, "runs", "job-7")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(context.Background(), inner, cfg, InitOptions{}); !errors.Is(err, ErrNested) {
		t.Fatalf("init inside a synced folder: %v, want ErrNested", err)
	}
	if _, err := Init(context.Background(), filepath.Dir(outer.dir), cfg, InitOptions{}); !errors.Is(err, ErrNested) {
		t.Fatalf("init of a folder holding a synced folder: %v, want ErrNested", err)
	}
	beside := filepath.Join(t.TempDir(), "beside")
	if err := os.Mkdir(beside, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(context.Background(), beside, cfg, InitOptions{}); err != nil {
		t.Fatalf("init of a folder apart from any other: %v", err)
	}
}
