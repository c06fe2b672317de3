package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// partialDir holds, per version being downloaded, the file being assembled
// in place: each chunk is written at its offsets as it arrives, so that
// once the version is stable only an fsync and a rename are left. It is
// the only place a downloaded byte is written before the rename: there is
// no chunk cache. A chunk needed again (at another offset of another
// version) is copied from the partial file where it landed, or from a
// local file that holds it, and checked against its hash. A partial file
// survives kill -9: on first use after a restart its chunk regions are
// read and checked against their hashes, and those that match count as
// done.
const partialDir = "partial"

// legacyChunkDir is where releases before this one cached downloaded
// chunks (.stabsync/chunks); Open removes it.
const legacyChunkDir = "chunks"

// part is one version's file being assembled.
type part struct {
	id     plan.VersionID
	name   string
	f      *os.File
	offs   []int64
	sizes  []uint32
	done   []bool
	left   int
	byHash map[plan.Hash][]int
}

// landing is where a chunk already lies in a partial file: a copy source
// for the other versions that need it.
type landing struct {
	p   *part
	off int64
	// size is the chunk's size.
	size uint32
}

func partialName(id plan.VersionID) string {
	h := sha256.Sum256([]byte(id))
	return path.Join(safepath.StateDir, partialDir, hex.EncodeToString(h[:16]))
}

// part returns the partial file of v, opening (and checking) it on first
// use in this process.
func (s *Syncer) part(v plan.Version) (*part, error) {
	if p := s.parts[v.ID]; p != nil {
		return p, nil
	}
	name := partialName(v.ID)
	if err := s.root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return nil, fmt.Errorf("client: partial file of %s: %w", v.Path, err)
	}
	f, err := s.root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("client: partial file of %s: %w", v.Path, err)
	}
	p := &part{id: v.ID, name: name, f: f, offs: make([]int64, len(v.Chunks)), sizes: make([]uint32, len(v.Chunks)),
		done: make([]bool, len(v.Chunks)), left: len(v.Chunks), byHash: map[plan.Hash][]int{}}
	var off int64
	for i, c := range v.Chunks {
		p.offs[i], p.sizes[i] = off, c.Size
		off += int64(c.Size)
		p.byHash[c.Hash] = append(p.byHash[c.Hash], i)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() == v.Size && v.Size > 0 {
		p.check(v) // what an earlier run wrote
	} else if err == nil {
		err = f.Truncate(v.Size)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("client: partial file of %s: %w", v.Path, err)
	}
	s.parts[v.ID] = p
	for h, is := range p.byHash {
		if p.done[is[0]] {
			s.landed(h, p, is[0])
		}
	}
	return p, nil
}

// check marks done the chunks whose region already holds their bytes.
func (p *part) check(v plan.Version) {
	var buf []byte
	for h, is := range p.byHash {
		c := v.Chunks[is[0]]
		if cap(buf) < int(c.Size) {
			buf = make([]byte, c.Size)
		}
		buf = buf[:c.Size]
		for _, i := range is {
			if _, err := p.f.ReadAt(buf, p.offs[i]); err == nil && sha256.Sum256(buf) == h {
				p.done[i] = true
				p.left--
			}
		}
	}
}

// put writes a chunk's bytes at every offset of the version that holds it
// and has not got it yet, and records where it landed. Bytes from the
// network are checked against the hash first; checked says the caller did
// (copyLanded, readLocal).
func (s *Syncer) put(p *part, h plan.Hash, data []byte, checked bool) error {
	if !checked && sha256.Sum256(data) != h {
		return fmt.Errorf("client: chunk %x: the bytes received do not match its hash", h[:8])
	}
	first := -1
	for _, i := range p.byHash[h] {
		if p.done[i] {
			continue
		}
		if _, err := p.f.WriteAt(data, p.offs[i]); err != nil {
			return fmt.Errorf("client: partial file: %w", err)
		}
		p.done[i] = true
		p.left--
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		s.landed(h, p, first)
	}
	return nil
}

// landed records that chunk h lies in p at chunk index i.
func (s *Syncer) landed(h plan.Hash, p *part, i int) {
	if _, ok := s.landings[h]; !ok {
		s.landings[h] = landing{p: p, off: p.offs[i], size: p.sizes[i]}
	}
}

// copyLanded reads chunk h from the partial file it landed in, checked
// against its hash; false if it landed nowhere or no longer checks out.
func (s *Syncer) copyLanded(h plan.Hash) ([]byte, bool) {
	l, ok := s.landings[h]
	if !ok {
		return nil, false
	}
	b := make([]byte, l.size)
	if _, err := l.p.f.ReadAt(b, l.off); err != nil || sha256.Sum256(b) != h {
		delete(s.landings, h)
		return nil, false
	}
	return b, true
}

// forget drops the landings in p: its file is closed or moved.
func (s *Syncer) forget(p *part) {
	for h := range p.byHash {
		if l, ok := s.landings[h]; ok && l.p == p {
			delete(s.landings, h)
		}
	}
}

// needs reports whether the part still lacks the chunk.
func (p *part) needs(h plan.Hash) bool {
	for _, i := range p.byHash[h] {
		if !p.done[i] {
			return true
		}
	}
	return false
}

// finish makes a complete part the file at tmp: fsync, close, rename.
// False when the part is not complete (or not open).
func (s *Syncer) finish(id plan.VersionID, tmp string) (bool, error) {
	p := s.parts[id]
	if p == nil || p.left > 0 {
		return false, nil
	}
	delete(s.parts, id)
	s.forget(p)
	err := p.f.Sync()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(p.name, tmp)
	}
	if err != nil {
		_ = s.root.Remove(p.name)
		return false, fmt.Errorf("client: assemble: %w", err)
	}
	return true, nil
}

// closeParts closes every partial file, keeping them on disk.
func (s *Syncer) closeParts() {
	for id, p := range s.parts {
		p.f.Close()
		delete(s.parts, id)
	}
	clear(s.landings)
}

// dropParts closes and removes every partial file: no download waits.
func (s *Syncer) dropParts() {
	s.closeParts()
	dir := path.Join(safepath.StateDir, partialDir)
	if ents, err := fs.ReadDir(s.root.FS(), dir); err == nil {
		for _, e := range ents {
			_ = s.root.Remove(path.Join(dir, e.Name()))
		}
	}
}
