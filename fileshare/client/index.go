package client

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// index is what a folder remembers between runs, in .stabsync/index.json:
// per path the version last synced there (Base), and per local file the
// chunk list computed for its stat, so that neither an upload nor a
// restart chunks a file twice.
type index struct {
	Base  map[string]plan.Base
	Files map[string]fileInfo
}

// fileInfo is a local file's chunk list as of its stat.
type fileInfo struct {
	Size    int64
	MTime   int64
	Mode    uint32
	Content plan.Hash
	Chunks  []plan.Chunk
}

func (f fileInfo) matches(l plan.Local) bool {
	return f.Size == l.Size && f.MTime == l.MTime && f.Mode == l.Mode
}

// The file format: hashes in hex.
type indexJSON struct {
	Version int                     `json:"version"`
	Base    map[string]baseJSON     `json:"base"`
	Files   map[string]fileInfoJSON `json:"files"`
}

type baseJSON struct {
	Version string `json:"version"`
	Content string `json:"content,omitempty"`
	Size    int64  `json:"size"`
	MTime   int64  `json:"mtime"`
	Mode    uint32 `json:"mode"`
}

type fileInfoJSON struct {
	Size    int64    `json:"size"`
	MTime   int64    `json:"mtime"`
	Mode    uint32   `json:"mode"`
	Content string   `json:"content"`
	Chunks  []string `json:"chunks"` // hex hash, ":", size
}

func hexOf(h plan.Hash) string {
	if h == (plan.Hash{}) {
		return ""
	}
	return hex.EncodeToString(h[:])
}

func parseHash(s string) (plan.Hash, error) {
	var h plan.Hash
	if s == "" {
		return h, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("bad hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

func newIndex() *index {
	return &index{Base: map[string]plan.Base{}, Files: map[string]fileInfo{}}
}

func loadIndex(root *os.Root) (*index, error) {
	name := path.Join(safepath.StateDir, indexFile)
	b, err := root.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return newIndex(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: index: %w", err)
	}
	var j indexJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("client: index %s: %w", name, err)
	}
	ix := newIndex()
	for p, b := range j.Base {
		c, err := parseHash(b.Content)
		if err != nil {
			return nil, fmt.Errorf("client: index %s: base %q: %w", name, p, err)
		}
		ix.Base[p] = plan.Base{Path: p, Version: plan.VersionID(b.Version), Content: c, Size: b.Size, MTime: b.MTime, Mode: b.Mode}
	}
	for p, f := range j.Files {
		c, err := parseHash(f.Content)
		if err != nil {
			return nil, fmt.Errorf("client: index %s: file %q: %w", name, p, err)
		}
		fi := fileInfo{Size: f.Size, MTime: f.MTime, Mode: f.Mode, Content: c, Chunks: make([]plan.Chunk, 0, len(f.Chunks))}
		for _, s := range f.Chunks {
			var ch plan.Chunk
			var hs string
			if _, err := fmt.Sscanf(s, "%64s:%d", &hs, &ch.Size); err != nil {
				return nil, fmt.Errorf("client: index %s: file %q: chunk %q: %w", name, p, s, err)
			}
			if ch.Hash, err = parseHash(hs); err != nil {
				return nil, fmt.Errorf("client: index %s: file %q: %w", name, p, err)
			}
			fi.Chunks = append(fi.Chunks, ch)
		}
		ix.Files[p] = fi
	}
	return ix, nil
}

// save writes the index atomically.
func (ix *index) save(root *os.Root) error {
	j := indexJSON{Version: 1, Base: map[string]baseJSON{}, Files: map[string]fileInfoJSON{}}
	for p, b := range ix.Base {
		j.Base[p] = baseJSON{Version: string(b.Version), Content: hexOf(b.Content), Size: b.Size, MTime: b.MTime, Mode: b.Mode}
	}
	for p, f := range ix.Files {
		fj := fileInfoJSON{Size: f.Size, MTime: f.MTime, Mode: f.Mode, Content: hexOf(f.Content), Chunks: make([]string, len(f.Chunks))}
		for i, c := range f.Chunks {
			fj.Chunks[i] = fmt.Sprintf("%x:%d", c.Hash[:], c.Size)
		}
		j.Files[p] = fj
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return writeAtomic(root, path.Join(safepath.StateDir, indexFile), b)
}
