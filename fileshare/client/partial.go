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
// once the version is stable only an fsync and a rename are left. A
// partial file survives kill -9: on first use after a restart its chunk
// regions are read and checked against their hashes, and those that
// match count as done.
const partialDir = "partial"

// part is one version's file being assembled.
type part struct {
	name   string
	f      *os.File
	offs   []int64
	done   []bool
	left   int
	byHash map[plan.Hash][]int
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
		return nil, fmt.Errorf("client: partial %s: %w", v.Path, err)
	}
	f, err := s.root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("client: partial %s: %w", v.Path, err)
	}
	p := &part{name: name, f: f, offs: make([]int64, len(v.Chunks)), done: make([]bool, len(v.Chunks)),
		left: len(v.Chunks), byHash: map[plan.Hash][]int{}}
	var off int64
	for i, c := range v.Chunks {
		p.offs[i] = off
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
		return nil, fmt.Errorf("client: partial %s: %w", v.Path, err)
	}
	s.parts[v.ID] = p
	return p, nil
}

// check marks done the chunks whose region already holds their bytes.
func (p *part) check(v plan.Version) {
	var buf []byte
	for i, c := range v.Chunks {
		if cap(buf) < int(c.Size) {
			buf = make([]byte, c.Size)
		}
		buf = buf[:c.Size]
		if _, err := p.f.ReadAt(buf, p.offs[i]); err == nil && sha256.Sum256(buf) == c.Hash {
			p.done[i] = true
			p.left--
		}
	}
}

// put writes a chunk's bytes at every offset of the version that holds
// it and has not got it yet.
func (p *part) put(h plan.Hash, data []byte) error {
	for _, i := range p.byHash[h] {
		if p.done[i] {
			continue
		}
		if _, err := p.f.WriteAt(data, p.offs[i]); err != nil {
			return fmt.Errorf("client: partial: %w", err)
		}
		p.done[i] = true
		p.left--
	}
	return nil
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
func (s *Syncer) finish(id plan.VersionID, tmp string) (bool, error) {
	p := s.parts[id]
	if p == nil || p.left > 0 {
		return false, nil
	}
	delete(s.parts, id)
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

// dropParts closes and removes every partial file: no download waits.
func (s *Syncer) dropParts() {
	for id, p := range s.parts {
		p.f.Close()
		delete(s.parts, id)
	}
	dir := path.Join(safepath.StateDir, partialDir)
	if ents, err := fs.ReadDir(s.root.FS(), dir); err == nil {
		for _, e := range ents {
			_ = s.root.Remove(path.Join(dir, e.Name()))
		}
	}
}
