package client

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// tmpPrefix starts the names of temp files, under the state dir's tmp.
const tmpPrefix = "stabsync-"

// tmpName returns a fresh name under the state dir's tmp directory.
func tmpName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return path.Join(safepath.StateDir, tmpDir, tmpPrefix+hex.EncodeToString(b[:]))
}

// writeAtomic replaces name with data: temp file, fsync, rename, fsync of
// the directory, so that after a crash name holds the old or the new
// bytes, never a mix.
func writeAtomic(root *os.Root, name string, data []byte) error {
	tmp := tmpName()
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("client: write %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("client: write %s: %w", name, err)
	}
	return syncDir(root, path.Dir(name))
}

// syncDir fsyncs a directory, making the renames in it durable.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("client: sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("client: sync dir %s: %w", dir, err)
	}
	return nil
}

// checkParents refuses a path one of whose parent directories is a
// symlink or not a directory: os.Root keeps every access inside the
// folder, this keeps a version from landing in another directory of it
// through a link.
func checkParents(root *os.Root, p string) error {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("client: %s: parent %s is a symlink", p, d)
		}
		if !fi.IsDir() {
			return fmt.Errorf("client: %s: parent %s is not a directory", p, d)
		}
	}
	return nil
}
