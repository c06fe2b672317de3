package segment

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// recoverAll recovers every stream directory in Dir, then syncs Dir and its
// parent: everything Open reports must be durable.
func (s *Store) recoverAll() error {
	dir := s.cfg.Dir
	names, err := s.fs.List(dir)
	if err != nil {
		return fmt.Errorf("segment: open %s: list: %w", dir, err)
	}
	slices.Sort(names)
	buf := make([]byte, 1<<20)
	for _, name := range names {
		if name == lockName {
			continue
		}
		if _, _, _, ok := parseStreamDirName(name); !ok {
			s.log.Warn("ignoring a file that names no stream", "dir", dir, "name", name)
			continue
		}
		if fi, err := s.fs.Stat(s.fs.PathJoin(dir, name)); err != nil || !fi.IsDir() {
			s.log.Warn("ignoring a file that is no directory", "dir", dir, "name", name, "error", err)
			continue
		}
		st, err := s.recoverStream(name, buf)
		if err != nil {
			return err
		}
		if st != nil {
			s.mu.streams[st.id] = st
		}
	}
	for _, d := range []string{dir, s.fs.PathDir(dir)} {
		if err := s.syncDir(d); err != nil {
			return fmt.Errorf("segment: open: %w", err)
		}
	}
	return nil
}

// recoverStream recovers the stream in directory dirName: it checks its
// segments, cuts the stream at the first torn or corrupt record, syncs what
// it keeps and returns the stream, or nil if nothing is left of it.
func (s *Store) recoverStream(dirName string, buf []byte) (*stream, error) {
	dir := s.fs.PathJoin(s.cfg.Dir, dirName)
	firsts, err := s.listSegments(dir)
	if err != nil {
		return nil, err
	}
	origin, name, hashed, _ := parseStreamDirName(dirName)
	id := streamID{origin, name}
	if hashed {
		var ok bool
		if id, ok, err = s.hashedNames(dir, dirName, firsts); err != nil || !ok {
			return nil, err
		}
	}
	st := &stream{id: id, dir: dir, dirMade: true, pinned: true}
	segs, err := s.recoverSegments(st, firsts, buf)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		// Nothing is left: the head is not recorded anywhere, so the stream
		// is new again (the node's own metadata says where it stands).
		if err := s.fs.Remove(dir); err != nil {
			s.log.Warn("could not remove an empty stream directory", "dir", dir, "error", err)
		}
		return nil, nil
	}
	for _, g := range segs[:len(segs)-1] {
		g.sealed = true
	}
	st.segs = segs
	st.floor = segs[0].first - 1
	st.head = segs[len(segs)-1].last()
	st.durable = st.head
	checkStreamLocked(st)
	return st, nil
}

// listSegments returns the first seqs of the segment files in dir, sorted.
func (s *Store) listSegments(dir string) ([]uint64, error) {
	names, err := s.fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("segment: open: list %s: %w", dir, err)
	}
	var firsts []uint64
	for _, name := range names {
		if first, ok := parseSegName(name); ok {
			firsts = append(firsts, first)
		} else {
			s.log.Warn("ignoring a file that is no segment", "dir", dir, "name", name)
		}
	}
	slices.Sort(firsts)
	return firsts, nil
}

// hashedNames reads the names of a stream whose directory name is a hash
// from the first segment header that decodes. If none does, it returns
// empty names: every segment then fails the name check and is cut. If the
// names do not hash to the directory's name, the directory is left alone
// (ok false): it is nobody's, and deleting it would guess.
func (s *Store) hashedNames(dir, dirName string, firsts []uint64) (streamID, bool, error) {
	for _, first := range firsts {
		path := s.fs.PathJoin(dir, segName(first))
		hb, _, err := s.readFileHeader(path)
		if err != nil {
			return streamID{}, false, err
		}
		o, st, _, herr := parseFileHeader(hb)
		if herr != nil {
			continue
		}
		id := streamID{o, st}
		if streamDirName(o, st) != dirName {
			s.log.Error("ignoring a stream directory whose segments name another stream",
				"dir", dir, "segment", path, "origin", id.origin, "stream", id.stream)
			return streamID{}, false, nil
		}
		return id, true, nil
	}
	return streamID{}, true, nil
}

// readFileHeader reads the bytes a file header may occupy at the start of
// the file at path, and the file's size.
func (s *Store) readFileHeader(path string) ([]byte, int64, error) {
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("segment: open: %w", err)
	}
	defer f.Close()
	return fileHeaderOf(f, path)
}

func fileHeaderOf(f vfs.File, path string) ([]byte, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("segment: open: stat %s: %w", path, err)
	}
	hb := make([]byte, min(fi.Size(), int64(maxFileHeader)))
	if err := readFull(f, hb, 0); err != nil {
		return nil, 0, fmt.Errorf("segment: open: read %s: %w", path, err)
	}
	return hb, fi.Size(), nil
}

// recoverSegments scans a stream's segments in seq order and keeps them up
// to the first torn or corrupt record: a bad file header, a record that
// does not check, non-zero bytes after the last record, a gap in seqs
// between segments. There it cuts: it zeroes the rest of that segment and
// deletes every later one. It then syncs what it keeps.
func (s *Store) recoverSegments(st *stream, firsts []uint64, buf []byte) ([]*segment, error) {
	var kept, drop []*segment
	var cut *segment // kept, with a tail to zero
	var cutPhys int64
	// next is the seq the next segment must start at; 0 before the first.
	var next uint64
	reason := ""
	for i, first := range firsts {
		path := s.fs.PathJoin(st.dir, segName(first))
		if reason != "" {
			drop = append(drop, &segment{first: first, path: path})
			continue
		}
		// Every segment but the last two is durable (see doc.go): only
		// those two can hold a torn record, so only they are read whole.
		sc, err := s.scanSegment(st.id, path, first, i >= len(firsts)-2, buf)
		if err != nil {
			return nil, err
		}
		g := sc.seg
		switch {
		case sc.headerErr != nil:
			reason = fmt.Sprintf("segment %s: %v", path, sc.headerErr)
		case next != 0 && first != next:
			reason = fmt.Sprintf("segment %s starts at seq %d where %d belongs", path, first, next)
		case sc.garbage != "":
			reason = fmt.Sprintf("segment %s offset %d: %s", path, g.size, sc.garbage)
			if len(g.offs) > 0 {
				kept, cut, cutPhys = append(kept, g), g, sc.phys
				continue
			}
		case len(g.offs) == 0:
			// Created, but its first record never reached the disk: a later
			// segment would follow a gap (next stays at its first seq).
			s.log.Info("removing a segment that holds no record", "origin", st.id.origin, "stream", st.id.stream, "segment", path)
			drop = append(drop, &segment{first: first, path: path})
			next = first
			continue
		default:
			kept = append(kept, g)
			next = g.last() + 1
			continue
		}
		drop = append(drop, &segment{first: first, path: path})
	}
	if reason != "" {
		s.metrics.tornTails.Inc()
		s.log.Warn("cut stream at its first torn or corrupt record", "origin", st.id.origin, "stream", st.id.stream,
			"reason", reason, "segments_deleted", len(drop))
	}
	if err := s.applyCut(cut, cutPhys, drop); err != nil {
		return nil, err
	}
	return kept, s.syncKept(st, kept)
}

// applyCut zeroes the tail of the segment cut holds after its last good
// record and removes the segments in drop.
func (s *Store) applyCut(cut *segment, phys int64, drop []*segment) error {
	if cut != nil {
		f, err := s.fs.OpenReadWrite(cut.path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("segment: open: cut %s: %w", cut.path, err)
		}
		err = zeroAt(f, cut.size, phys)
		if err == nil {
			err = f.SyncData()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("segment: open: cut %s at %d: %w", cut.path, cut.size, err)
		}
	}
	for _, g := range drop {
		if err := s.fs.Remove(g.path); err != nil {
			return fmt.Errorf("segment: open: cut %s: %w", g.path, err)
		}
		s.metrics.deletedSegments.Inc()
	}
	return nil
}

// syncKept makes what recovery keeps durable: the last two segments (the
// only ones a crash can have left with unsynced data) and the directory.
func (s *Store) syncKept(st *stream, kept []*segment) error {
	for _, g := range kept[max(0, len(kept)-2):] {
		f, err := s.fs.OpenReadWrite(g.path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("segment: open: %w", err)
		}
		err = f.SyncData()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("segment: open: sync %s: %w", g.path, err)
		}
	}
	if err := s.syncDir(st.dir); err != nil {
		return fmt.Errorf("segment: open: %w", err)
	}
	return nil
}

// scanned is what Open learnt of one segment file.
type scanned struct {
	seg  *segment
	phys int64
	// headerErr says why the file header is unreadable: then nothing in the
	// file can be trusted, and seg is nil.
	headerErr error
	// garbage says why the non-zero bytes after the last good record are
	// no record; "" if there are none.
	garbage string
}

// scanSegment reads a segment file's header and walks its records,
// checking every record's header and, if full, its payload's checksum too.
// An error is an IO failure or a format it does not know, not corruption.
func (s *Store) scanSegment(id streamID, path string, first uint64, full bool, buf []byte) (scanned, error) {
	f, err := s.fs.Open(path)
	if err != nil {
		return scanned{}, fmt.Errorf("segment: open: %w", err)
	}
	defer f.Close()
	hb, phys, err := fileHeaderOf(f, path)
	if err != nil {
		return scanned{}, err
	}
	sc := scanned{phys: phys}
	origin, stream, n, herr := parseFileHeader(hb)
	if errors.Is(herr, errVersion) {
		return sc, fmt.Errorf("segment: open %s: %v: %w", path, herr, ErrCorrupt)
	}
	if herr == nil && (origin != id.origin || stream != id.stream) {
		herr = fmt.Errorf("file header names stream %s", streamID{origin, stream})
	}
	if herr != nil {
		sc.headerErr = herr
		return sc, nil
	}
	g := &segment{first: first, path: path, hdrLen: int64(n)}
	reason, err := walkRecords(f, g, phys, full, buf)
	if err != nil {
		return sc, fmt.Errorf("segment: open: read %s: %w", path, err)
	}
	g.syncedSize = g.size
	sc.seg = g
	if reason == "" {
		return sc, nil
	}
	zero, err := zeroTail(f, g.size, phys, buf)
	if err != nil {
		return sc, fmt.Errorf("segment: open: read %s: %w", path, err)
	}
	if !zero {
		sc.garbage = reason
	}
	return sc, nil
}

// walkRecords reads g's records from the end of its file header on,
// filling g.offs and g.size, until the end of the file or the first record
// that does not check; it returns why it stopped early ("" if it did not).
func walkRecords(f vfs.File, g *segment, phys int64, full bool, buf []byte) (string, error) {
	off, want := g.hdrLen, g.first
	var hb [recHeaderLen]byte
	defer func() { g.size = off }()
	for off < phys {
		if phys-off < recHeaderLen {
			return "short record header", nil
		}
		if err := readFull(f, hb[:], off); err != nil {
			return "", err
		}
		h, err := parseRecHeader(hb[:])
		if err != nil {
			return err.Error(), nil
		}
		if h.seq != want {
			return fmt.Sprintf("record holds seq %d where %d belongs", h.seq, want), nil
		}
		end := off + recHeaderLen + int64(h.length)
		if end > phys {
			return fmt.Sprintf("record of %d bytes runs past the end of the file", h.length), nil
		}
		if full {
			ok, err := checkPayload(f, hb[:], h.crc, off+recHeaderLen, end, buf)
			if err != nil {
				return "", err
			}
			if !ok {
				return "record checksum mismatch", nil
			}
		}
		g.offs = append(g.offs, off)
		off, want = end, want+1
	}
	return "", nil
}

// checkPayload reads the payload in [from, to) through buf and reports
// whether the record's checksum matches.
func checkPayload(f vfs.File, hdr []byte, want uint32, from, to int64, buf []byte) (bool, error) {
	c := startCRC(hdr)
	for from < to {
		b := buf[:min(int64(len(buf)), to-from)]
		if err := readFull(f, b, from); err != nil {
			return false, err
		}
		c = crc32.Update(c, castagnoli, b)
		from += int64(len(b))
	}
	return c == want, nil
}

// zeroTail reports whether [from, to) of f holds only zero bytes.
func zeroTail(f vfs.File, from, to int64, buf []byte) (bool, error) {
	for from < to {
		b := buf[:min(int64(len(buf)), to-from)]
		if err := readFull(f, b, from); err != nil {
			return false, err
		}
		if !allZero(b) {
			return false, nil
		}
		from += int64(len(b))
	}
	return true, nil
}

// zeroAt overwrites [from, to) of f with zeros: how this package cuts a
// file, since vfs.File has no Truncate. A zeroed tail reads as the end of
// the segment.
func zeroAt(f vfs.File, from, to int64) error {
	zeros := make([]byte, min(to-from, 64<<10))
	for from < to {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-from)], from)
		if err != nil {
			return err
		}
		from += int64(n)
	}
	return nil
}

// readFull reads len(b) bytes at off; a short file is io.ErrUnexpectedEOF.
func readFull(f vfs.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
