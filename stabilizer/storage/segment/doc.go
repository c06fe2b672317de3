// Package segment stores the payloads of bulk streams (file chunks of about
// a megabyte) outside pebble, in append-only segment files, one directory
// per stream. Each byte is written once, with a checksum; Sync makes
// records durable in groups on the writer's schedule; truncation deletes
// whole segment files; and Open cuts a torn or corrupt tail, so that a
// record that does not check is never served.
//
// # Usage
//
//	s, err := segment.Open(segment.Config{Dir: dir, Logger: log.Named("segment"), Registerer: reg})
//	...
//	err = s.Append("eu-west-1", "chunks", []segment.Record{{Seq: head + 1, HLC: now, Head: hdr, Payload: chunk}})
//	durable, err := s.Sync()                   // e.g. [{eu-west-1 chunks 42}]: send or ack up to 42
//	recs, err := s.Read("eu-west-1", "chunks", from, 16, 8<<20)
//	err = s.Truncate("eu-west-1", "chunks", upto) // whole segments <= upto go
//	for _, si := range s.Streams() { ... }     // after a restart: First, Head, Durable of each
//
// Append checks that a stream's records continue its head without a gap
// (ErrSeqGap). Read returns only durable records, so an origin never sends
// what a crash could take back. The floor set by Truncate and the head set
// by Reset live in memory only: after a restart a stream starts at its
// first segment file and ends at its last record, and the node applies its
// own metadata again (Truncate, or Reset for a stream it knows to be
// further than what is left on disk).
//
// # Format
//
// Dir holds a LOCK file and one directory per stream, named by its origin
// and stream escaped and joined by '.': lower-case letters, digits, '-' and
// '_' stay, every other byte becomes %XX, so the name is reversible, never
// "." or "..", and the same on case-insensitive filesystems. When that name
// would be longer than 255 bytes, the directory is '~' and 40 hex digits of
// a SHA-256 of both names, and the names are read back from the segment
// headers, which carry them anyway.
//
// A stream's directory holds its segment files, each named by the seq of
// its first record, zero-padded to 20 digits so that names sort as seqs do:
// 00000000000000000001.seg. A file starts with a header:
//
//	"STBSEG", version (1 byte, 1), len(origin), len(stream), origin, stream,
//	CRC-32C of all of that (4 bytes)
//
// then holds records back to back, each a 32-byte header and the payload:
//
//	0  4  CRC-32C of bytes 4..32 and the payload
//	4  4  CRC-32C of bytes 8..32: the header alone
//	8  4  payload length
//	12 4  "srec"
//	16 8  seq
//	24 8  HLC
//
// Integers are little-endian; the CRC is Castagnoli's. A record is valid if
// its magic and both checksums match and its seq is the next one. A zeroed
// or short header is not, so a torn tail (a short file, or a tail of zeros
// where unsynced blocks never reached the disk) is never taken for a
// record. The header's own checksum lets Open walk a segment reading only
// headers; the unknown version of a future format makes Open fail rather
// than cut.
//
// A segment is sealed once it reaches Config.SegmentBytes: the next record
// starts a new file, and a record larger than SegmentBytes goes alone in a
// segment. Sealed segments are never written again. In memory each record
// costs its offset (8 bytes) in its segment's index; its length is the
// distance to the next.
//
// vfs.File has no Truncate, so cutting a file means overwriting the cut
// bytes with zeros and syncing them. Zeros after the last record read as
// the end of a segment, and the next Append overwrites them.
//
// # Durability
//
// Sync makes durable every record appended before it was called: it
// fdatasyncs each segment file written since the last Sync, and fsyncs each
// directory in which a segment file or a stream directory was created.
// Only then does it report the new durable heads. An fsync error fails the
// store: after one, nothing can be said about what reached the disk, so
// every later Append, Sync, Reset and Truncate returns ErrFailed (Read and
// Streams keep serving what was durable before). Reopen to recover.
//
// A failed write leaves the stream as it was: Append zeroes and syncs the
// bytes it wrote into the active segment and removes a segment it created;
// if even that fails, the store fails. A full disk (ENOSPC) is such a
// failed write: the Append fails, nothing else does, and Appends succeed
// again once there is space.
//
// Truncate and Reset delete segment files oldest first and fsync the
// directory before returning, so that what they deleted stays deleted: a
// crash that brought back some deleted segments and not others would leave
// a gap, which Open cuts. A Truncate that cannot delete a segment stops
// there (the stream on disk stays contiguous) and returns the error; a
// Reset that cannot fails the store, since the segment left behind would
// precede the next Append's with a gap.
//
// At most the last two segments of a stream ever hold unsynced data: when
// an Append creates a segment while the one two places before it has not
// been synced through its end (the writer appended a whole segment without
// calling Sync), it fdatasyncs that one first. So a crash can tear only the
// last two segments, and Open reads those whole, checking every record's
// checksum, and the others by their headers alone: their payloads are
// checked on every Read instead (lazily), where a mismatch is ErrCorrupt,
// counted and logged, and never returns the bytes. This keeps Open's cost
// independent of how much a stream holds.
//
// Open walks each stream's segments in seq order and cuts the stream at the
// first torn or corrupt record: an unreadable file header, a record that
// does not check, non-zero bytes after the last record, a gap between one
// segment's last seq and the next one's first. It zeroes that segment from
// the last good record on, deletes every later segment of the stream,
// logs what it cut and counts it (stabilizer_segment_torn_tails_cut_total).
// It then fdatasyncs the last two segments and fsyncs each stream's
// directory, Dir and Dir's parent, so that everything it reports is durable
// even if the previous process died with writes in the page cache.
//
// After kill -9 the page cache survives: Open finds every appended record
// whose write completed, synced or not, and cuts only a record the process
// was writing when it died. After a power loss, unsynced blocks may be
// missing or zeroed anywhere in the last two segments: Open keeps the
// records up to the first that does not check and deletes the rest. Either
// way every record a Sync reported is kept, unless the disk itself
// corrupted it.
//
// Built with the invariants tag (as `make test` does), every change of a
// stream's state is checked against what the rest of the package relies
// on: contiguous segments, all but the last sealed, the floor and heads in
// order.
//
// # Concurrency
//
// A Store is safe for concurrent use. It expects one writer goroutine per
// stream (Append, Truncate, Reset; a stream's writer calls are serialized
// anyway), Sync from that or another goroutine, and any number of readers.
// Sync may run while the writer appends the next group: it holds no lock an
// Append needs across its fsyncs, only while it takes its snapshot and
// while it records the result. Reads of different records run concurrently,
// with ReadAt on shared read handles.
//
// Lock order: stream.wmu (a stream's writer calls, held across their writes
// and removals) and Store.syncMu (Sync calls, held across fsyncs) come
// first and are never held together; Store.mu (all shared state) is a leaf
// and is never held across IO. A file handle used outside Store.mu is
// reference-counted, and whoever drops the last reference closes it, so
// Truncate may delete a segment that a Sync is syncing or a Read is
// reading. Close waits for the calls in progress and is idempotent. The
// package starts no goroutines.
package segment
