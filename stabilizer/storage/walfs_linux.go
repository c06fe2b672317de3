package storage

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// walFS makes pebble's WAL preallocation extend the file. Pebble
// preallocates with FALLOC_FL_KEEP_SIZE, so each WAL write still grows the
// file and every fdatasync must also commit its new size: on ext4, a
// journal commit. A WAL that pebble recycled already has its size and
// skips that; extending at preallocation gives a new WAL the same cheap
// fsync from its second write on (pebble preallocates once a write finds
// the file non-empty). Every acknowledged write waits for one at
// each site that persists it (measured here: fdatasync of 300 appended
// bytes 212 µs, into an extended file 152 µs). Pebble's WAL reader already
// takes a zeroed tail for the end of the log, as it does after recycling.
type walFS struct{ vfs.FS }

func defaultFS() vfs.FS { return walFS{vfs.Default} }

func (fs walFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return extendingWAL(name, f, err)
}

func (fs walFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return extendingWAL(newname, f, err)
}

func extendingWAL(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return extendingFile{f}, nil
}

type extendingFile struct{ vfs.File }

func (f extendingFile) Preallocate(offset, length int64) error {
	return unix.Fallocate(int(f.Fd()), 0, offset, length)
}
