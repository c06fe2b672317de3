package plan

// The vocabulary shared by the site (which resolves what a share shows) and
// the client (which plans what to do to its folder). Nothing here does IO.

// Hash is a SHA-256 digest: of a chunk's bytes (a chunk id), or of a file's
// chunk list (a version's Content).
type Hash [32]byte

// VersionID names one version of one path, the same at every site. It is
// made by NewVersionID from the writing site and the HLC of the write, so
// two writers never make the same id by accident; derived ids (see
// ConflictName) are made from other ids.
type VersionID string

// HLC orders versions: physical nanoseconds, then a logical counter.
type HLC struct {
	Wall    int64
	Logical uint32
}

// Less orders two HLCs.
func (h HLC) Less(o HLC) bool {
	if h.Wall != o.Wall {
		return h.Wall < o.Wall
	}
	return h.Logical < o.Logical
}

// Chunk is one content-defined piece of a file.
type Chunk struct {
	Hash Hash
	Size uint32
}

// Version is one recorded state of one path: content, or a tombstone.
type Version struct {
	ID   VersionID
	Path string // slash-separated, relative, checked by package safepath
	// Parents are the versions this one was written on top of: the
	// version the writer had at Path (empty for a new file), plus the
	// losing heads it had kept as conflict copies (also in Kept).
	Parents []VersionID
	// Kept lists losing concurrent heads the writer saw shown as conflict
	// copies: they stay shown as copies although this version descends
	// from them.
	Kept    []VersionID
	Deleted bool // a tombstone: the path was deleted on top of Parents
	Size    int64
	Mode    uint32 // permission bits
	MTime   int64  // unix nanoseconds, as the writer saw it
	// Content identifies the bytes: the hash of the chunk list (ContentOf);
	// two versions with equal Content hold equal bytes.
	Content Hash
	Chunks  []Chunk
	HLC     HLC
	Origin  string // the site that recorded it
	// Commit groups the versions of a directory published as one
	// (a checkpoint committed by its marker): all CommitFiles versions
	// with this Commit become visible together, or none does.
	Commit      string
	CommitFiles int
	// Stable is set by the site: the version and every chunk it names are
	// persisted where the share's visibility predicate says.
	Stable bool
	// Pruned: history retention dropped the version's chunk list, once a
	// newer stable version superseded it. It still counts for ancestry,
	// but is never shown.
	Pruned bool
}
