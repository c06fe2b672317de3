package manifest

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/chunks"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// The limits of a manifest. Decode refuses an encoding past MaxChunks,
// MaxParents or MaxBytes before it allocates anything for it.
const (
	// MaxChunks is the most chunks of one version: 8 TiB of MaxSize
	// chunks, 512 GiB of MinSize ones, far past a 10 GB shard.
	MaxChunks = 1 << 20
	// MaxParents is the most parents, and the most kept, of one version:
	// concurrent heads of one path, which a writer resolves long before.
	MaxParents = 64
	// MaxName is the longest id (of the version, a parent, a kept head or
	// a commit), share or origin, in bytes.
	MaxName = 256
	// MaxCommitFiles is the most versions of one commit.
	MaxCommitFiles = 1 << 20
	// MaxBytes is the longest encoding Decode reads: MaxChunks chunks with
	// origins of 64 bytes, seqs of 64 bits and streams named (129 bytes a
	// chunk at most) fit.
	MaxBytes = 144 << 20
)

// Stream is the name of the files transfer (fileshare.Stream), whose
// stripes hold the chunks a manifest names: stripe 0 is the stream
// "files", stripe i > 0 the stream "files/i" (stabilizer.Node.HandleStriped).
const Stream = "files"

// IsStripe reports whether name is a stripe of the files transfer: Stream,
// or Stream+"/"+i for a decimal i > 0 without leading zeros.
func IsStripe(name string) bool {
	if name == Stream {
		return true
	}
	i, ok := strings.CutPrefix(name, Stream+"/")
	if !ok || i == "" || i[0] == '0' || len(i) > 9 {
		return false
	}
	for _, c := range []byte(i) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ErrBadManifest is wrapped by every refusal of Validate and Decode.
var ErrBadManifest = errors.New("manifest: bad manifest")

// Encode validates v and returns its deterministic encoding.
func Encode(v *filesharepb.Version) ([]byte, error) {
	if err := Validate(v); err != nil {
		return nil, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("manifest: encode version %q: %w", v.GetId(), err)
	}
	return b, nil
}

// Decode decodes and validates a version that came from another site.
// Unknown fields (of a newer writer) are kept, and Encode writes them back.
func Decode(b []byte) (*filesharepb.Version, error) {
	if err := precheck(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	v := new(filesharepb.Version)
	if err := proto.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	if err := Validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

// Field numbers of filesharepb.Version that precheck counts.
const (
	fieldParents protowire.Number = 3
	fieldKept    protowire.Number = 4
	fieldChunks  protowire.Number = 10
)

// precheck refuses, before proto.Unmarshal allocates a message per element,
// an encoding longer than MaxBytes or with more repeated elements than the
// limits: two bytes of the wire make a ChunkRef of a hundred.
func precheck(b []byte) error {
	if len(b) > MaxBytes {
		return fmt.Errorf("%d bytes, at most %d", len(b), MaxBytes)
	}
	var parents, kept, chunks int
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil // malformed: proto.Unmarshal says how
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil
		}
		b = b[n+m:]
		switch num {
		case fieldParents:
			parents++
		case fieldKept:
			kept++
		case fieldChunks:
			chunks++
		}
	}
	switch {
	case chunks > MaxChunks:
		return fmt.Errorf("%d chunks, at most %d", chunks, MaxChunks)
	case parents > MaxParents:
		return fmt.Errorf("%d parents, at most %d", parents, MaxParents)
	case kept > MaxParents:
		return fmt.Errorf("%d kept, at most %d", kept, MaxParents)
	}
	return nil
}

// Validate reports every problem of v (up to 32, then how many more), each
// naming its field and value, in one error that wraps ErrBadManifest (and
// safepath.ErrBadPath for a bad path). It checks what the site and the client rely on:
//   - id is 1 to MaxName bytes, share and origin are 1 to MaxName bytes;
//   - path passes safepath.Check;
//   - parents and kept are distinct ids of 1 to MaxName bytes, at most
//     MaxParents of each, and every kept head is a parent;
//   - a tombstone (deleted) has no chunks, size 0, and no content, or the
//     content of no chunks;
//   - otherwise every chunk has a 32-byte hash, a size in (0,
//     chunks.MaxSize], an origin and a seq > 0 or neither (not yet
//     located), a stream only with them and then a stripe of the files
//     transfer (IsStripe; empty means Stream), at most MaxChunks of them;
//     their sizes sum to size; content is the 32-byte hash of the chunk
//     list (plan.ContentOf);
//   - mode holds only permission bits (<= 0o777);
//   - commit_files > 0 exactly when commit is set, at most MaxCommitFiles.
//
// mtime, the HLC and stable are not checked: any value is one a writer
// may have meant. The site sets stable itself; it must not take it from a
// manifest.
func Validate(v *filesharepb.Version) error {
	if v == nil {
		return fmt.Errorf("%w: nil version", ErrBadManifest)
	}
	var errs []error
	more := 0
	bad := func(format string, args ...any) {
		if len(errs) == maxProblems {
			more++
			return
		}
		errs = append(errs, fmt.Errorf(format, args...))
	}
	name := func(field, s string) {
		switch {
		case s == "":
			bad("%s empty", field)
		case len(s) > MaxName:
			bad("%s of %d bytes, at most %d", field, len(s), MaxName)
		}
	}
	name("id", v.GetId())
	name("share", v.GetShare())
	name("origin", v.GetOrigin())
	if err := safepath.Check(v.GetPath()); err != nil {
		bad("path: %w", err)
	}

	ids := func(field string, list []string) map[string]bool {
		if len(list) > MaxParents {
			bad("%d %s, at most %d", len(list), field, MaxParents)
		}
		seen := make(map[string]bool, len(list))
		for i, id := range list {
			name(fmt.Sprintf("%s[%d]", field, i), id)
			if seen[id] {
				bad("%s[%d] %s given twice", field, i, quote(id))
			}
			seen[id] = true
		}
		return seen
	}
	parents := ids("parents", v.GetParents())
	ids("kept", v.GetKept())
	for i, id := range v.GetKept() {
		if !parents[id] {
			bad("kept[%d] %s is not a parent", i, quote(id))
		}
	}

	cs := v.GetChunks()
	if v.GetDeleted() {
		if len(cs) != 0 {
			bad("tombstone with %d chunks", len(cs))
		}
		if v.GetSize() != 0 {
			bad("tombstone of size %d", v.GetSize())
		}
		if c := v.GetContent(); len(c) != 0 && !equalHash(c, contentOf(nil)) {
			bad("tombstone with content %x", c)
		}
	} else if v.GetPruned() {
		// History retention dropped the chunk list: the size and the
		// content stay as they were, for the record.
		if len(cs) != 0 {
			bad("pruned version with %d chunks", len(cs))
		}
		if len(v.GetContent()) != 32 {
			bad("content of %d bytes, want 32", len(v.GetContent()))
		}
	} else {
		if len(cs) > MaxChunks {
			bad("%d chunks, at most %d", len(cs), MaxChunks)
		}
		var sum int64
		chunksOK := len(cs) <= MaxChunks
		for i, c := range cs {
			if n := len(c.GetHash()); n != 32 {
				bad("chunks[%d] hash of %d bytes, want 32", i, n)
				chunksOK = false
			}
			if s := c.GetSize(); s == 0 || s > chunks.MaxSize {
				bad("chunks[%d] size %d, want 1 to %d", i, s, chunks.MaxSize)
			}
			// A chunk names where it lives (origin and seq), or neither:
			// a version recorded before its chunks were uploaded
			// (CommitRequest.early), resolved by hash at each site.
			// It lives in one of the origin's files streams: stream,
			// empty for Stream (refs written before transfers were
			// striped, and stripe 0's since).
			if c.GetOrigin() != "" || c.GetSeq() != 0 {
				name(fmt.Sprintf("chunks[%d] origin", i), c.GetOrigin())
				if c.GetSeq() == 0 {
					bad("chunks[%d] seq 0", i)
				}
				if st := c.GetStream(); st != "" && !IsStripe(st) {
					bad("chunks[%d] stream %s, want %q or %q", i, quote(st), Stream, Stream+"/N")
				}
			} else if st := c.GetStream(); st != "" {
				bad("chunks[%d] stream %s without an origin and a seq", i, quote(st))
			}
			sum += int64(c.GetSize())
		}
		if sum != v.GetSize() {
			bad("size %d, its chunks sum to %d", v.GetSize(), sum)
		}
		switch c := v.GetContent(); {
		case len(c) != 32:
			bad("content of %d bytes, want 32", len(c))
		case chunksOK && !equalHash(c, contentOf(planChunks(cs))):
			bad("content %x is not the hash of the chunk list", c)
		}
	}

	if m := v.GetMode(); m > 0o777 {
		bad("mode %O, want permission bits only (at most 0o777)", m)
	}
	switch c, n := v.GetCommit(), v.GetCommitFiles(); {
	case c == "" && n != 0:
		bad("commit_files %d without a commit", n)
	case c != "" && n == 0:
		bad("commit %s with commit_files 0", quote(c))
	case n > MaxCommitFiles:
		bad("commit_files %d, at most %d", n, MaxCommitFiles)
	}
	if c := v.GetCommit(); c != "" {
		name("commit", c)
	}

	if len(errs) == 0 {
		return nil
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("and %d more problems", more))
	}
	return fmt.Errorf("%w: version %s: %w", ErrBadManifest, quote(v.GetId()), errors.Join(errs...))
}

// maxProblems is the most problems Validate names; past it, it counts them.
// A manifest of a million bad chunks makes a short error.
const maxProblems = 32

// quote quotes a string from the network for an error, cut to 64 bytes.
func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}

func equalHash(b []byte, h plan.Hash) bool {
	return len(b) == len(h) && [32]byte(b) == h
}

// contentOf is plan.ContentOf: one definition for site and client.
var contentOf = plan.ContentOf

// planChunks converts chunk refs; a hash that is not 32 bytes becomes a
// zero-padded or truncated one (Validate refuses it).
func planChunks(cs []*filesharepb.ChunkRef) []plan.Chunk {
	out := make([]plan.Chunk, len(cs))
	for i, c := range cs {
		copy(out[i].Hash[:], c.GetHash())
		out[i].Size = c.GetSize()
	}
	return out
}

// ToPlan converts a valid version to the vocabulary of package plan. It
// copies everything it keeps: the result shares no memory with v. Share is
// not a field of plan.Version; the caller knows it.
func ToPlan(v *filesharepb.Version) plan.Version {
	p := plan.Version{
		ID:          plan.VersionID(v.GetId()),
		Path:        v.GetPath(),
		Parents:     toIDs(v.GetParents()),
		Kept:        toIDs(v.GetKept()),
		Deleted:     v.GetDeleted(),
		Size:        v.GetSize(),
		Mode:        v.GetMode(),
		MTime:       v.GetMtime(),
		HLC:         plan.HLC{Wall: v.GetHlcWall(), Logical: v.GetHlcLogical()},
		Origin:      v.GetOrigin(),
		Commit:      v.GetCommit(),
		CommitFiles: int(v.GetCommitFiles()),
		Stable:      v.GetStable(),
		Pruned:      v.GetPruned(),
	}
	copy(p.Content[:], v.GetContent())
	if cs := v.GetChunks(); len(cs) > 0 {
		p.Chunks = planChunks(cs)
	}
	return p
}

func toIDs(ss []string) []plan.VersionID {
	if len(ss) == 0 {
		return nil
	}
	ids := make([]plan.VersionID, len(ss))
	for i, s := range ss {
		ids[i] = plan.VersionID(s)
	}
	return ids
}
