package segment

import "fmt"

// checkStreamLocked panics if st's state breaks what the rest of the
// package relies on; it does nothing unless built with the invariants tag.
// The caller holds Store.mu (or is Open, before anything else runs).
func checkStreamLocked(st *stream) {
	if !invariantsOn {
		return
	}
	if err := streamInvariants(st); err != nil {
		panic(fmt.Sprintf("segment: stream %s: %v", st.id, err))
	}
}

func streamInvariants(st *stream) error {
	if st.floor > st.head || st.durable > st.head {
		return fmt.Errorf("floor %d, durable %d, head %d", st.floor, st.durable, st.head)
	}
	if len(st.segs) == 0 {
		if st.floor != st.head {
			return fmt.Errorf("no segment, floor %d, head %d", st.floor, st.head)
		}
		return nil
	}
	if first := st.segs[0].first; st.floor+1 < first {
		return fmt.Errorf("floor %d below the first segment's seq %d - 1", st.floor, first)
	}
	if last := st.segs[len(st.segs)-1]; last.sealed || last.last() != st.head {
		return fmt.Errorf("last segment sealed %v, ends at %d, head %d", last.sealed, last.last(), st.head)
	}
	for i, g := range st.segs {
		if err := segmentInvariants(g); err != nil {
			return err
		}
		if i > 0 && (g.first != st.segs[i-1].last()+1 || !st.segs[i-1].sealed) {
			return fmt.Errorf("segment %s follows seq %d, sealed %v", g.path, st.segs[i-1].last(), st.segs[i-1].sealed)
		}
	}
	return nil
}

func segmentInvariants(g *segment) error {
	if len(g.offs) == 0 || g.offs[0] != g.hdrLen || g.deleted || g.syncedSize > g.size {
		return fmt.Errorf("segment %s: %d records from %v, deleted %v, synced %d of %d",
			g.path, len(g.offs), g.offs[:min(1, len(g.offs))], g.deleted, g.syncedSize, g.size)
	}
	for k := range g.offs {
		if g.end(k)-g.offs[k] < recHeaderLen {
			return fmt.Errorf("segment %s: record %d spans %d..%d", g.path, k, g.offs[k], g.end(k))
		}
	}
	return nil
}
