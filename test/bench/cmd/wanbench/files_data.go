package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// The checkpoints the file-sync bench writes, the same bytes for both
// systems: shards of random data from seeded ChaCha8 streams, written
// into ckpt/step-N/ and committed by renaming .metadata into place last,
// as PyTorch's distributed checkpoint does.

const (
	fsShare      = "ckpt"
	fsMarker     = ".metadata"
	fsCommitDirs = "ckpt/*"
	// fsRunBytes is the length of the contiguous runs the second
	// checkpoint changes in its edited shards.
	fsRunBytes = 4 << 20
	// fsEditShare is the share of an edited shard's bytes changed.
	fsEditShare = 0.10
)

// ckptFile is one file of a checkpoint as written.
type ckptFile struct {
	Name string `json:"name"` // within the checkpoint's directory
	Size int64  `json:"size"`
	SHA  string `json:"sha256"`
	// How it came about: "new", "unchanged", "rewritten", "edited",
	// "marker".
	How string `json:"how"`
	// Changed is how many of its bytes the previous checkpoint lacks.
	Changed int64 `json:"changed"`
}

// ckpt is a checkpoint: its directory under the folder and its files.
type ckpt struct {
	Dir   string     `json:"dir"` // e.g. ckpt/step-1000
	Files []ckptFile `json:"files"`
}

func (c *ckpt) bytes() (total, changed int64) {
	for _, f := range c.Files {
		total += f.Size
		changed += f.Changed
	}
	return total, changed
}

// want maps the checkpoint's paths (folder-relative, slash-separated) to
// their SHA-256, as stpeer.WaitInSync takes them.
func (c *ckpt) want() map[string]string {
	out := map[string]string{}
	for _, f := range c.Files {
		out[path.Join(c.Dir, f.Name)] = f.SHA
	}
	return out
}

// stream is a seeded source of random bytes.
func stream(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	copy(s[8:], "stabilizer-files-bench")
	return rand.NewChaCha8(s)
}

// writeRandom writes size random bytes of seed to p and returns their
// SHA-256.
func writeRandom(p string, size int64, seed uint64) (string, error) {
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.CopyN(io.MultiWriter(f, h), stream(seed), size)
	return hex.EncodeToString(h.Sum(nil)), closeWith(f, err)
}

func closeWith(f *os.File, err error) error {
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// editRuns picks non-overlapping runs covering share of size, each
// fsRunBytes long but the last, at random offsets of seed: [offset, end).
func editRuns(size int64, share float64, seed uint64) [][2]int64 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	left := int64(float64(size) * share)
	var runs [][2]int64
	for left > 0 {
		n := min(int64(fsRunBytes), left)
		off := r.Int64N(size - n + 1)
		if slices.ContainsFunc(runs, func(x [2]int64) bool { return off < x[1] && x[0] < off+n }) {
			continue
		}
		runs = append(runs, [2]int64{off, off + n})
		left -= n
	}
	slices.SortFunc(runs, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	return runs
}

// copyEdited copies src to dst with runs overwritten by random bytes of
// seed, and returns dst's SHA-256.
func copyEdited(src, dst string, runs [][2]int64, seed uint64) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	w := io.MultiWriter(out, h)
	rnd := stream(seed)
	var at int64
	for _, run := range runs {
		if _, err = io.CopyN(w, in, run[0]-at); err != nil {
			return "", closeWith(out, err)
		}
		if _, err = io.CopyN(w, rnd, run[1]-run[0]); err != nil {
			return "", closeWith(out, err)
		}
		if _, err = in.Seek(run[1], io.SeekStart); err != nil {
			return "", closeWith(out, err)
		}
		at = run[1]
	}
	if _, err = io.Copy(w, in); err != nil {
		return "", closeWith(out, err)
	}
	return hex.EncodeToString(h.Sum(nil)), closeWith(out, err)
}

// shardName is the i-th shard's file name, as DCP names them.
func shardName(i int) string { return fmt.Sprintf("__%d_0.distcp", i) }

// writeCkpt1 writes the first checkpoint into folder: shards new shards
// of size bytes. It
// returns the checkpoint; commitCkpt commits it.
func writeCkpt1(folder, dir string, shards int, size int64) (*ckpt, error) {
	c := &ckpt{Dir: dir}
	d := filepath.Join(folder, filepath.FromSlash(dir))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	for i := range shards {
		sum, err := writeRandom(filepath.Join(d, shardName(i)), size, uint64(1000+i))
		if err != nil {
			return nil, err
		}
		c.Files = append(c.Files, ckptFile{Name: shardName(i), Size: size, SHA: sum, How: "new", Changed: size})
	}
	return c, nil
}

// writeCkpt2 writes the next checkpoint after prev (whose shards are in
// folder): shard 0 unchanged, shard 1 rewritten, shards 2 and 3 with
// fsEditShare of their bytes changed in contiguous runs, and one shard
// added.
func writeCkpt2(folder, dir string, prev *ckpt) (*ckpt, error) {
	prev = &ckpt{Dir: prev.Dir, Files: slices.DeleteFunc(slices.Clone(prev.Files), func(f ckptFile) bool { return f.How == "marker" })}
	if len(prev.Files) < 4 {
		return nil, fmt.Errorf("the first checkpoint has %d shards; the second needs 4", len(prev.Files))
	}
	c := &ckpt{Dir: dir}
	d := filepath.Join(folder, filepath.FromSlash(dir))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	src := func(i int) string { return filepath.Join(folder, filepath.FromSlash(prev.Dir), prev.Files[i].Name) }
	for i := range len(prev.Files) + 1 {
		name := shardName(i)
		dst := filepath.Join(d, name)
		f := ckptFile{Name: name}
		var err error
		switch {
		case i == 0:
			f.Size, f.How = prev.Files[0].Size, "unchanged"
			f.SHA, err = copyEdited(src(0), dst, nil, 0)
		case i == 1 || i == len(prev.Files):
			f.Size, f.How, f.Changed = prev.Files[0].Size, "rewritten", prev.Files[0].Size
			if i == len(prev.Files) {
				f.How = "new"
			}
			f.SHA, err = writeRandom(dst, f.Size, uint64(2000+i))
		case i <= 3:
			f.Size, f.How = prev.Files[i].Size, "edited"
			runs := editRuns(f.Size, fsEditShare, uint64(3000+i))
			for _, r := range runs {
				f.Changed += r[1] - r[0]
			}
			f.SHA, err = copyEdited(src(i), dst, runs, uint64(4000+i))
		default: // more than four shards before: the rest unchanged
			f.Size, f.How = prev.Files[i].Size, "unchanged"
			f.SHA, err = copyEdited(src(i), dst, nil, 0)
		}
		if err != nil {
			return nil, err
		}
		c.Files = append(c.Files, f)
	}
	return c, nil
}

// commitCkpt writes the marker (the checkpoint's file list) into staging
// and renames it into the checkpoint's directory: the commit. It adds the
// marker to c.
func commitCkpt(folder, staging string, c *ckpt) error {
	b, _ := json.Marshal(c.Files)
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(staging, fsMarker)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	s := sha256.Sum256(b)
	c.Files = append(c.Files, ckptFile{Name: fsMarker, Size: int64(len(b)), SHA: hex.EncodeToString(s[:]), How: "marker", Changed: int64(len(b))})
	return os.Rename(tmp, filepath.Join(folder, filepath.FromSlash(c.Dir), fsMarker))
}

// ckptPresent reports whether every file of c is in folder with its size.
func ckptPresent(folder string, c *ckpt) bool {
	for _, f := range c.Files {
		st, err := os.Stat(filepath.Join(folder, filepath.FromSlash(c.Dir), f.Name))
		if err != nil || st.Size() != f.Size {
			return false
		}
	}
	return true
}

// verifyCkpt hashes every file of c in folder.
func verifyCkpt(folder string, c *ckpt) error {
	for _, f := range c.Files {
		p := filepath.Join(folder, filepath.FromSlash(c.Dir), f.Name)
		got, err := sha256File(p)
		if err != nil {
			return err
		}
		if got != f.SHA {
			return fmt.Errorf("%s: sha256 %s, want %s", p, got, f.SHA)
		}
	}
	return nil
}

func sha256File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h hash.Hash = sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
