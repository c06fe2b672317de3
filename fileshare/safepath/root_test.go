package safepath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRootRefusesSymlinkOut shows why the client goes through os.Root:
// Check accepts "link/secret" (it cannot know that link is a symlink), and
// the *os.Root refuses to reach outside the folder through it, for every
// method the client uses, while a symlink that stays inside still works.
func TestRootRefusesSymlinkOut(t *testing.T) {
	base := t.TempDir()
	folder := filepath.Join(base, "folder")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{folder, outside, filepath.Join(folder, "in")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(folder, "in", "f"), []byte("inside"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"link":    outside,                        // absolute, to outside
		"rel":     filepath.Join("..", "outside"), // relative, to outside
		"inlink":  "in",                           // stays inside
		"badfile": secret,                         // a file symlink to outside
	} {
		if err := os.Symlink(target, filepath.Join(folder, name)); err != nil {
			t.Fatal(err)
		}
	}

	root, err := os.OpenRoot(folder)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	for _, p := range []string{"link/secret", "rel/secret", "badfile", "link/new", "inlink/f"} {
		if err := Check(p); err != nil {
			t.Fatalf("Check(%q) = %v; the test needs paths Check accepts", p, err)
		}
	}
	escapes := map[string]func() error{
		"Open":      func() error { f, err := root.Open("link/secret"); closeIf(f); return err },
		"OpenRel":   func() error { f, err := root.Open("rel/secret"); closeIf(f); return err },
		"OpenFile":  func() error { f, err := root.OpenFile("badfile", os.O_RDONLY, 0); closeIf(f); return err },
		"Create":    func() error { f, err := root.Create("link/new"); closeIf(f); return err },
		"WriteFile": func() error { return root.WriteFile("badfile", []byte("x"), 0o600) },
		"Mkdir":     func() error { return root.Mkdir("link/d", 0o755) },
		"MkdirAll":  func() error { return root.MkdirAll("link/d/e", 0o755) },
		"Rename":    func() error { return root.Rename("in/f", "link/stolen") },
		"RenameOut": func() error { return root.Rename("link/secret", "in/got") },
		"Remove":    func() error { return root.Remove("link/secret") },
		"Lstat":     func() error { _, err := root.Lstat("link/secret"); return err },
		"Stat":      func() error { _, err := root.Stat("badfile"); return err },
		"Chmod":     func() error { return root.Chmod("link/secret", 0o666) },
		"DotDot":    func() error { f, err := root.Open("../outside/secret"); closeIf(f); return err },
	}
	for name, op := range escapes {
		if err := op(); err == nil {
			t.Errorf("%s through a symlink out of the root succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "secret" {
		t.Errorf("secret = %q, %v after the attempts; want it untouched", b, err)
	}
	for _, p := range []string{"stolen", "new", "d", "got"} {
		if _, err := os.Lstat(filepath.Join(outside, p)); err == nil {
			t.Errorf("%s appeared outside the root", p)
		}
	}

	// A symlink that resolves inside the folder is followed.
	if b, err := root.ReadFile("inlink/f"); err != nil || string(b) != "inside" {
		t.Errorf("ReadFile(inlink/f) = %q, %v; want inside", b, err)
	}
	// Lstat and Remove act on a final symlink itself, never its target.
	if fi, err := root.Lstat("badfile"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Lstat(badfile) = %v, %v; want the symlink", fi, err)
	}
	if err := root.Remove("badfile"); err != nil {
		t.Errorf("Remove(badfile) = %v", err)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("removing the symlink touched its target: %v", err)
	}
	// The atomic write the client does: temp file, fsync, rename, dir fsync.
	f, err := root.OpenFile("in/.tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := root.Rename("in/.tmp", "in/f"); err != nil {
		t.Fatal(err)
	}
	d, err := root.Open("in")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if b, err := root.ReadFile("in/f"); err != nil || string(b) != "v2" {
		t.Errorf("after rename in/f = %q, %v; want v2", b, err)
	}
}

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}
