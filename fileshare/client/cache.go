package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// cache is the folder's chunk cache for downloads, under
// .stabsync/chunks/<first 2 hex digits>/<64 hex digits>: content-addressed
// (a chunk's name is its SHA-256, checked again on every read) and
// written like every state file (temp, fsync, rename, dir fsync), so that
// a download cut by kill -9 resumes from the chunks already there.
type cache struct{ root *os.Root }

func (c cache) name(h plan.Hash) string {
	x := hex.EncodeToString(h[:])
	return path.Join(safepath.StateDir, chunkDir, x[:2], x)
}

func (c cache) has(h plan.Hash) bool {
	_, err := c.root.Lstat(c.name(h))
	return err == nil
}

// get reads a cached chunk; a chunk whose bytes do not match its name is
// removed and reported missing.
func (c cache) get(h plan.Hash) ([]byte, bool) {
	b, err := c.root.ReadFile(c.name(h))
	if err != nil {
		return nil, false
	}
	if sha256.Sum256(b) != h {
		_ = c.root.Remove(c.name(h))
		return nil, false
	}
	return b, true
}

func (c cache) put(h plan.Hash, data []byte) error {
	if sha256.Sum256(data) != h {
		return fmt.Errorf("client: chunk %x: data does not match its hash", h[:])
	}
	n := c.name(h)
	if err := c.root.MkdirAll(path.Dir(n), 0o755); err != nil {
		return fmt.Errorf("client: cache: %w", err)
	}
	return writeAtomic(c.root, n, data)
}

func (c cache) remove(h plan.Hash) {
	if err := c.root.Remove(c.name(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
}
