package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// NewVersionID names the version recorded by origin at HLC h: the wall time
// and logical counter in fixed-width hex, then the origin, so ids sort by
// HLC (for walls >= 0) and two sites never make the same id.
func NewVersionID(origin string, h HLC) VersionID {
	return VersionID(fmt.Sprintf("%016x%08x-%s", uint64(h.Wall), h.Logical, origin))
}

// ContentOf is a version's Content: SHA-256 over each chunk's hash followed
// by its size (4 bytes, big endian). Equal chunk lists give equal Content.
func ContentOf(chunks []Chunk) Hash {
	d := sha256.New()
	var size [4]byte
	for _, c := range chunks {
		d.Write(c.Hash[:])
		binary.BigEndian.PutUint32(size[:], c.Size)
		d.Write(size[:])
	}
	var h Hash
	d.Sum(h[:0])
	return h
}

// conflictMarker starts the tag ConflictName puts into a base name; the tag
// that follows is conflictTagLen lowercase hex digits.
const (
	conflictMarker = ".sync-conflict-"
	conflictTagLen = 16
)

// conflictTag is the part of a copy's name that names the loser: a hex
// prefix of SHA-256 of its id, the same at every site and safe in any
// file system whatever the origin's name holds.
func conflictTag(loser VersionID) string {
	sum := sha256.Sum256([]byte(loser))
	return hex.EncodeToString(sum[:])[:conflictTagLen]
}

// ConflictName is where the losing version loser of path is shown:
// dir/base.sync-conflict-<tag>.ext, the extension being what follows the
// last dot of the base name (none for dotfiles such as ".bashrc" and for
// names without a dot). A marker already in the base name is replaced, not
// nested: the copy of a copy sits next to the original under the original's
// name.
func ConflictName(p string, loser VersionID) string {
	dir, base := path.Split(p)
	stem, ext := splitExt(stripConflict(base))
	return dir + stem + conflictMarker + conflictTag(loser) + ext
}

// IsConflictName reports whether the base name of p carries a conflict
// marker, as made by ConflictName.
func IsConflictName(p string) bool {
	base := path.Base(p)
	return stripConflict(base) != base
}

// splitExt splits a base name before its last dot; a leading dot (a
// dotfile) does not start an extension.
func splitExt(base string) (stem, ext string) {
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		return base, ""
	}
	return base[:i], base[i:]
}

// stripConflict removes a conflict marker from the end of base, or from the
// end of its stem, and returns base unchanged if it has none.
func stripConflict(base string) string {
	if s, ok := cutMarker(base); ok {
		return s
	}
	stem, ext := splitExt(base)
	if s, ok := cutMarker(stem); ok {
		return s + ext
	}
	return base
}

// cutMarker removes a trailing ".sync-conflict-<tag>" from s.
func cutMarker(s string) (string, bool) {
	n := len(conflictMarker) + conflictTagLen
	if len(s) < n || !strings.HasPrefix(s[len(s)-n:], conflictMarker) {
		return s, false
	}
	for _, c := range s[len(s)-conflictTagLen:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return s, false
		}
	}
	return s[:len(s)-n], true
}
