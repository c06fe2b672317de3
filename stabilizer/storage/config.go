package storage

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Sentinel errors. Match them with errors.Is; returned errors wrap them with
// the operand that failed.
var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("storage: closed")
	// ErrNotFound is returned by lookups of a key that is not present.
	ErrNotFound = errors.New("storage: not found")
	// ErrInvalid reports a bad argument: an empty or too long name, seq 0,
	// an empty message list.
	ErrInvalid = errors.New("storage: invalid argument")
	// ErrSeqGap is returned by Write when appended messages do not continue
	// their stream's head exactly (a gap, a duplicate or a non-increasing
	// seq). Nothing of that Write's batch is written.
	ErrSeqGap = errors.New("storage: messages do not continue the stream")
	// ErrTruncated is returned by ReadRange when the first requested message
	// has been removed by Truncate.
	ErrTruncated = errors.New("storage: messages truncated")
	// ErrCorrupt reports data on disk this package cannot decode.
	ErrCorrupt = errors.New("storage: corrupt data")
	// ErrFailed is returned by every Write after a commit to disk failed.
	// After a failed fsync nothing can be said about what reached the disk,
	// so the store refuses further writes; close it and reopen to recover.
	ErrFailed = errors.New("storage: store failed")
)

// Defaults for zero Config fields.
const (
	DefaultMaxGroupBytes    = 16 << 20
	DefaultMaxGroupRequests = 4096
	DefaultCacheSize        = 64 << 20
	DefaultMemTableSize     = 4 << 20
	// DefaultMemTableStopWrites is how many memtables may queue for
	// flushing before writes stall; pebble keeps that many and one more
	// write-ahead logs for reuse, each preallocated to about a memtable.
	DefaultMemTableStopWrites = 3
)

// Config configures Open. The zero value of every field except Dir means
// the documented default.
type Config struct {
	// Dir is the directory of the pebble database; created if missing.
	// Required.
	Dir string
	// Logger receives the store's and pebble's logs. Default: no logs.
	// Pass a Named logger, e.g. logger.Named("storage").
	Logger hclog.Logger
	// Registerer receives the store's metrics (stabilizer_storage_*).
	// Default: metrics are kept but not registered anywhere.
	Registerer prometheus.Registerer
	// MaxGroupBytes bounds the encoded size of one group commit: concurrent
	// Writes are combined into one synced pebble commit until this many
	// bytes. A single larger Write is committed alone. Default 16 MiB.
	MaxGroupBytes int
	// MaxGroupRequests bounds how many Writes one group commit combines.
	// Default 4096.
	MaxGroupRequests int
	// CacheSize is pebble's block cache size in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is pebble's memtable size in bytes. Pebble holds the
	// site's metadata, KV and pub/sub logs, not bulk payloads (those are
	// in the segment store), so small memtables suffice; they also size
	// the write-ahead logs pebble keeps for reuse (about MemTableSize ×
	// (DefaultMemTableStopWrites + 1) of disk in all). Default 4 MiB, at
	// most 1 GiB.
	MemTableSize int
	// FS is the filesystem pebble runs on: every file access of the store
	// goes through it, so that tests can drop unsynced writes, fail writes
	// and fsyncs, or corrupt files (pebble's vfs, errorfs). Default: the
	// operating system's, with write-ahead logs extended as they are
	// preallocated (walfs_linux.go).
	FS vfs.FS
}

// Validate reports every bad field of c, not only the first.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("storage: config: Dir: missing"))
	}
	if c.MaxGroupBytes < 0 {
		errs = append(errs, fmt.Errorf("storage: config: MaxGroupBytes: %d is negative", c.MaxGroupBytes))
	}
	if c.MaxGroupRequests < 0 {
		errs = append(errs, fmt.Errorf("storage: config: MaxGroupRequests: %d is negative", c.MaxGroupRequests))
	}
	if c.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("storage: config: CacheSize: %d is negative", c.CacheSize))
	}
	if c.MemTableSize < 0 || c.MemTableSize > 1<<30 {
		errs = append(errs, fmt.Errorf("storage: config: MemTableSize: %d is outside [0, 1 GiB]", c.MemTableSize))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.MaxGroupBytes == 0 {
		c.MaxGroupBytes = DefaultMaxGroupBytes
	}
	if c.MaxGroupRequests == 0 {
		c.MaxGroupRequests = DefaultMaxGroupRequests
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.MemTableSize == 0 {
		c.MemTableSize = DefaultMemTableSize
	}
	return c
}
