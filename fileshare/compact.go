package fileshare

// RelocateRatio: a collection drops a prefix of its site's own files stream
// once the live chunks in it, which it rewrites first, are at most this
// share of the prefix's bytes.
const RelocateRatio = 0.25

// MaxRelocateBytes bounds what one collection rewrites of its own stream.
const MaxRelocateBytes = 256 << 20

// compaction is what a collection does to a prefix of its site's own files
// stream: relocate Move (the live chunks in it), then drop every entry up
// to Upto.
type compaction struct {
	Upto uint64
	// Move: one entry per live chunk of the prefix that has no
	// relocation beyond it yet, in seq order.
	Move []entryMeta
	// Bytes is the prefix's size, MoveBytes what Move rewrites.
	Bytes, MoveBytes int64
}

// planCompaction picks, of the own stream's entries above its floor (in
// seq order, from the index), the prefix ending at or below limit most
// worth dropping: what must be moved out of it (its live chunks) is at most
// ratio of its bytes and at most maxMove bytes, and of such prefixes it
// frees the most dead bytes, and of those it is the shortest (a longer one
// would only move more). A live chunk needs moving when its last
// relocation entry, if any, lies in the prefix: once relocated beyond it,
// every site locates it there, and its older entries are dead. A prefix
// that needs no move at all is left to plain truncation (the zero
// compaction): the collector truncates below the lowest located entry
// anyway. Nor does a prefix reach an entry of a chunk waiting out its grace
// period (waiting): it may be committed yet, and would have to move then,
// or be dropped, and need no move.
func planCompaction(entries []entryMeta, limit uint64, live, waiting func([32]byte) bool, ratio float64, maxMove int64) compaction {
	for _, e := range entries {
		if e.Seq <= limit && !e.Bad && waiting(e.Hash) {
			limit = e.Seq - 1
			break
		}
	}
	// start[h]: from which prefix end on chunk h needs moving: its first
	// entry, or its last relocation, beyond limit too.
	start := map[[32]byte]uint64{}
	for _, e := range entries {
		if e.Bad || !live(e.Hash) {
			continue
		}
		if s, ok := start[e.Hash]; !ok || e.Reloc && e.Seq > s {
			start[e.Hash] = e.Seq
		}
	}
	var best compaction
	end := -1
	var bytes, move, dead, bestDead int64
	for i, e := range entries {
		if e.Seq > limit {
			break
		}
		bytes += int64(e.Size)
		if !e.Bad && start[e.Hash] == e.Seq {
			move += int64(e.Size)
		} else {
			dead += int64(e.Size)
		}
		if move > maxMove {
			break
		}
		if move > 0 && dead > bestDead && float64(move) <= ratio*float64(bytes) {
			best, end, bestDead = compaction{Upto: e.Seq, Bytes: bytes, MoveBytes: move}, i, dead
		}
	}
	for _, e := range entries[:end+1] {
		if !e.Bad && start[e.Hash] == e.Seq {
			best.Move = append(best.Move, e)
		}
	}
	return best
}
