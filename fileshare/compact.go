package fileshare

// RelocateRatio: a collection drops a prefix of one of its site's own
// files streams once the live chunks in it, which it rewrites first, are at
// most this share of the prefix's bytes.
const RelocateRatio = 0.25

// MaxRelocateBytes bounds what one collection rewrites of its own streams.
const MaxRelocateBytes = 256 << 20

// compaction is what a collection does to a prefix of one of its site's own
// files streams: relocate Move (the live chunks located in it), then drop
// every entry up to Upto.
type compaction struct {
	Upto uint64
	// Move: the entries of the live chunks located in the prefix, in seq
	// order.
	Move []entryMeta
	// Bytes is the prefix's size, MoveBytes what Move rewrites.
	Bytes, MoveBytes int64
}

// planCompaction picks, of one own files stream's entries above its floor
// (in seq order, from the index), the prefix ending at or below limit most
// worth dropping: what must be moved out of it (its live chunks) is at most
// ratio of its bytes and at most maxMove bytes, and of such prefixes it
// frees the most dead bytes, more than plain truncation frees (the dead
// entries before the first that needs moving), and of those it is the
// shortest (a longer one would only move more). A live chunk needs moving
// when the site locates it at an entry of the prefix (at says at which seq
// of this stream, false when it is located in another stream): the chunk's
// first entry, or its last relocation; once relocated beyond the prefix, or
// into another stream, every site locates it there, and its entries in the
// prefix are dead. A prefix that needs no move at all is left to plain
// truncation (the zero compaction): the collector truncates below the lowest
// located entry anyway. Nor does a prefix reach an entry of a chunk waiting
// out its grace period (waiting): it may be committed yet, and would have to
// move then, or be dropped, and need no move.
func planCompaction(entries []entryMeta, limit uint64, live, waiting func([32]byte) bool, at func([32]byte) (uint64, bool), ratio float64, maxMove int64) compaction {
	for _, e := range entries {
		if e.Seq <= limit && !e.Bad && waiting(e.Hash) {
			limit = e.Seq - 1
			break
		}
	}
	// located: whether an entry is where its live chunk is located.
	located := func(e entryMeta) bool {
		if e.Bad || !live(e.Hash) {
			return false
		}
		seq, ok := at(e.Hash)
		return ok && seq == e.Seq
	}
	var best compaction
	end := -1
	var bytes, move, dead, bestDead int64
	for i, e := range entries {
		if e.Seq > limit {
			break
		}
		bytes += int64(e.Size)
		if located(e) {
			move += int64(e.Size)
		} else {
			dead += int64(e.Size)
		}
		if move > maxMove {
			break
		}
		if move == 0 {
			// Plain truncation drops this much anyway: a compaction
			// must drop more.
			bestDead = dead
			continue
		}
		if dead > bestDead && float64(move) <= ratio*float64(bytes) {
			best, end, bestDead = compaction{Upto: e.Seq, Bytes: bytes, MoveBytes: move}, i, dead
		}
	}
	for _, e := range entries[:end+1] {
		if located(e) {
			best.Move = append(best.Move, e)
		}
	}
	return best
}
