package segment

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
	ErrClosed = errors.New("segment: closed")
	// ErrInvalid reports a bad argument: an empty or too long name, seq 0, an
	// empty or too large record, a Reset below the head, a Truncate above it.
	ErrInvalid = errors.New("segment: invalid argument")
	// ErrSeqGap is returned by Append when the records do not continue their
	// stream's head exactly (a gap, a duplicate or a non-increasing seq).
	// Nothing of that Append is written.
	ErrSeqGap = errors.New("segment: records do not continue the stream")
	// ErrTruncated is returned by Read when the first requested record is at
	// or below the stream's floor: removed by Truncate or Reset, or never
	// held.
	ErrTruncated = errors.New("segment: records truncated")
	// ErrCorrupt reports bytes on disk whose checksum or framing is wrong. The
	// bytes are never returned.
	ErrCorrupt = errors.New("segment: corrupt data")
	// ErrFailed is returned by every Append, Sync, Reset and Truncate after a
	// write could not be undone or an fsync failed: nothing can then be said
	// about what reached the disk. Close the store and open it again, which
	// recovers what is intact.
	ErrFailed = errors.New("segment: store failed")
)

// Defaults for zero Config fields, and limits.
const (
	DefaultSegmentBytes = 64 << 20
	DefaultMaxOpenFiles = 64
	// MinSegmentBytes and MaxSegmentBytes bound Config.SegmentBytes.
	MinSegmentBytes = 1 << 10
	MaxSegmentBytes = 1 << 40
	// MaxRecordBytes bounds one record's payload (Head and Payload together).
	MaxRecordBytes = 1 << 30
	// MaxNameLen bounds an origin or stream name, in bytes.
	MaxNameLen = 255
)

// Config configures Open. The zero value of every field except Dir means the
// documented default.
type Config struct {
	// Dir is the directory that holds one subdirectory per stream; created
	// if missing. Required.
	Dir string
	// FS is the filesystem every file operation goes through, so that tests
	// can drop unsynced writes, fail operations and corrupt files. Default
	// vfs.Default.
	FS vfs.FS
	// SegmentBytes is the size at which a segment is sealed: the record that
	// follows starts a new segment file. A record larger than SegmentBytes
	// goes alone in a segment. Truncation frees space in whole segments, so
	// this is also its granularity. Default 64 MiB; between 1 KiB and 1 TiB.
	SegmentBytes int64
	// MaxOpenFiles bounds the read handles kept open, least recently used
	// first out. Write handles (one or two per stream being written) are
	// not counted. Default 64.
	MaxOpenFiles int
	// Logger receives the store's logs: what Open cut, failures. Default: no
	// logs. Pass a Named logger, e.g. logger.Named("segment").
	Logger hclog.Logger
	// Registerer receives the store's metrics (stabilizer_segment_*); Close
	// unregisters them. Default: metrics are kept but not registered.
	Registerer prometheus.Registerer
}

// Validate reports every bad field of c, not only the first.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("segment: config: Dir: missing"))
	}
	if c.SegmentBytes != 0 && (c.SegmentBytes < MinSegmentBytes || c.SegmentBytes > MaxSegmentBytes) {
		errs = append(errs, fmt.Errorf("segment: config: SegmentBytes: %d is outside [1 KiB, 1 TiB]", c.SegmentBytes))
	}
	if c.MaxOpenFiles < 0 {
		errs = append(errs, fmt.Errorf("segment: config: MaxOpenFiles: %d is negative", c.MaxOpenFiles))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c
}
