package manifest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/chunks"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

func hash(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// valid returns a valid version of a file of three chunks.
func valid() *filesharepb.Version {
	v := &filesharepb.Version{
		Id:          "us-east-1/1733000000000000000.0",
		Path:        "ckpt/step-100/__0_0.distcp",
		Parents:     []string{"p1", "p2"},
		Kept:        []string{"p2"},
		Mode:        0o644,
		Mtime:       1733000000000000000,
		HlcWall:     1733000000000000001,
		HlcLogical:  3,
		Origin:      "us-east-1",
		Commit:      "us-east-1/1733000000000000000.0",
		CommitFiles: 4,
		Share:       "ckpt",
		Chunks: []*filesharepb.ChunkRef{
			{Hash: hash(1), Size: chunks.MaxSize, Origin: "us-east-1", Seq: 7},
			{Hash: hash(2), Size: chunks.MinSize, Origin: "eu-west-1", Seq: 1},
			{Hash: hash(1), Size: chunks.MaxSize, Origin: "us-east-1", Seq: 7},
			{Hash: hash(3), Size: 10, Origin: "us-east-1", Seq: 9, Stream: "files/1"},
		},
	}
	v.Size = 2*chunks.MaxSize + chunks.MinSize + 10
	c := contentOf(planChunks(v.Chunks))
	v.Content = c[:]
	return v
}

func tombstone() *filesharepb.Version {
	return &filesharepb.Version{Id: "t", Path: "a/b", Parents: []string{"p"}, Deleted: true, Origin: "eu-west-1", Share: "s"}
}

func emptyFile() *filesharepb.Version {
	c := contentOf(nil)
	return &filesharepb.Version{Id: "e", Path: "empty", Origin: "eu-west-1", Share: "s", Content: c[:]}
}

// TestContentOf pins the definition plan.ContentOf must share.
func TestContentOf(t *testing.T) {
	cs := []plan.Chunk{{Hash: plan.Hash(hash(1)), Size: 0x01020304}, {Hash: plan.Hash(hash(2)), Size: 5}}
	var b []byte
	b = append(b, hash(1)...)
	b = append(b, 1, 2, 3, 4)
	b = append(b, hash(2)...)
	b = append(b, 0, 0, 0, 5)
	if got, want := contentOf(cs), plan.Hash(sha256.Sum256(b)); got != want {
		t.Errorf("contentOf = %x, want %x", got, want)
	}
	if got, want := contentOf(nil), plan.Hash(sha256.Sum256(nil)); got != want {
		t.Errorf("contentOf(nil) = %x, want the hash of nothing %x", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	withUnknown := valid()
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "from a newer site"))
	for name, v := range map[string]*filesharepb.Version{
		"file":          valid(),
		"tombstone":     tombstone(),
		"empty file":    emptyFile(),
		"unknown field": withUnknown,
		"tombstone with empty content": func() *filesharepb.Version {
			v := tombstone()
			c := contentOf(nil)
			v.Content = c[:]
			return v
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Encode(v)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !proto.Equal(got, v) {
				t.Errorf("Decode(Encode(v)) = %v, want %v", got, v)
			}
			b2, err := Encode(got)
			if err != nil || !bytes.Equal(b2, b) {
				t.Errorf("Encode is not deterministic: %x then %x (%v)", b, b2, err)
			}
		})
	}
}

func TestValidateRefuses(t *testing.T) {
	long := strings.Repeat("x", MaxName+1)
	many := func(n int) []string {
		var ids []string
		for i := range n {
			ids = append(ids, "p"+string(rune('A'+i%26))+strings.Repeat("x", i/26))
		}
		return ids
	}
	for _, tc := range []struct {
		name   string
		edit   func(v *filesharepb.Version)
		want   string // in the message
		isPath bool   // wraps safepath.ErrBadPath too
	}{
		{"no id", func(v *filesharepb.Version) { v.Id = "" }, "id empty", false},
		{"long id", func(v *filesharepb.Version) { v.Id = long }, "id of 257 bytes, at most 256", false},
		{"no share", func(v *filesharepb.Version) { v.Share = "" }, "share empty", false},
		{"long share", func(v *filesharepb.Version) { v.Share = long }, "share of 257 bytes", false},
		{"no origin", func(v *filesharepb.Version) { v.Origin = "" }, "origin empty", false},
		{"no path", func(v *filesharepb.Version) { v.Path = "" }, `path: safepath: bad path "": empty`, true},
		{"path dotdot", func(v *filesharepb.Version) { v.Path = "../etc/passwd" }, `segment 0 is ".."`, true},
		{"absolute path", func(v *filesharepb.Version) { v.Path = "/etc/passwd" }, "absolute", true},
		{"state dir", func(v *filesharepb.Version) { v.Path = ".stabsync/db" }, "state directory", true},
		{"empty parent", func(v *filesharepb.Version) { v.Parents = []string{"p1", ""} }, "parents[1] empty", false},
		{"long parent", func(v *filesharepb.Version) { v.Parents = []string{long}; v.Kept = nil }, "parents[0] of 257 bytes", false},
		{"parent twice", func(v *filesharepb.Version) { v.Parents = []string{"p1", "p2", "p1"} }, `parents[2] "p1" given twice`, false},
		{"too many parents", func(v *filesharepb.Version) { v.Parents = many(MaxParents + 1); v.Kept = nil }, "65 parents, at most 64", false},
		{"empty kept", func(v *filesharepb.Version) { v.Kept = []string{""} }, "kept[0] empty", false},
		{"kept twice", func(v *filesharepb.Version) { v.Kept = []string{"p2", "p2"} }, `kept[1] "p2" given twice`, false},
		{"kept not a parent", func(v *filesharepb.Version) { v.Kept = []string{"p3"} }, `kept[0] "p3" is not a parent`, false},
		{"too many kept", func(v *filesharepb.Version) { v.Parents = many(MaxParents); v.Kept = many(MaxParents + 1) }, "65 kept, at most 64", false},
		{"tombstone with chunks", func(v *filesharepb.Version) { v.Deleted = true; v.Size = 0; v.Content = nil }, "tombstone with 4 chunks", false},
		{"tombstone with size", func(v *filesharepb.Version) { *v = *tombstone(); v.Size = 1 }, "tombstone of size 1", false},
		{"tombstone with content", func(v *filesharepb.Version) { *v = *tombstone(); v.Content = hash(9) }, "tombstone with content 0909", false},
		{"short hash", func(v *filesharepb.Version) { v.Chunks[1].Hash = hash(2)[:31] }, "chunks[1] hash of 31 bytes, want 32", false},
		{"no hash", func(v *filesharepb.Version) { v.Chunks[0].Hash = nil }, "chunks[0] hash of 0 bytes", false},
		{"chunk size 0", func(v *filesharepb.Version) { v.Size -= 10; v.Chunks[3].Size = 0 }, "chunks[3] size 0, want 1 to 8388608", false},
		{"chunk too big", func(v *filesharepb.Version) { v.Size++; v.Chunks[0].Size++ }, "chunks[0] size 8388609", false},
		{"chunk without origin", func(v *filesharepb.Version) { v.Chunks[2].Origin = "" }, "chunks[2] origin empty", false},
		{"chunk seq 0", func(v *filesharepb.Version) { v.Chunks[2].Seq = 0 }, "chunks[2] seq 0", false},
		{"chunk of another stream", func(v *filesharepb.Version) { v.Chunks[1].Stream = "kv" }, `chunks[1] stream "kv", want "files" or "files/N"`, false},
		{"chunk of stripe 0 spelled", func(v *filesharepb.Version) { v.Chunks[1].Stream = "files/0" }, `chunks[1] stream "files/0"`, false},
		{"stream without origin", func(v *filesharepb.Version) { v.Chunks[3].Origin, v.Chunks[3].Seq = "", 0 }, `chunks[3] stream "files/1" without an origin and a seq`, false},
		{"size off", func(v *filesharepb.Version) { v.Size++ }, fmt.Sprintf("size %d, its chunks sum to %d", 2*chunks.MaxSize+chunks.MinSize+11, 2*chunks.MaxSize+chunks.MinSize+10), false},
		{"negative size", func(v *filesharepb.Version) { *v = *emptyFile(); v.Size = -1 }, "size -1, its chunks sum to 0", false},
		{"no content", func(v *filesharepb.Version) { v.Content = nil }, "content of 0 bytes, want 32", false},
		{"empty file without content", func(v *filesharepb.Version) { *v = *emptyFile(); v.Content = nil }, "content of 0 bytes", false},
		{"wrong content", func(v *filesharepb.Version) { v.Content = hash(4) }, "is not the hash of the chunk list", false},
		{"chunks reordered", func(v *filesharepb.Version) { v.Chunks[0], v.Chunks[1] = v.Chunks[1], v.Chunks[0] }, "is not the hash of the chunk list", false},
		{"chunk sizes moved", func(v *filesharepb.Version) { v.Chunks[3].Size++; v.Chunks[1].Size-- }, "is not the hash of the chunk list", false},
		{"setuid", func(v *filesharepb.Version) { v.Mode = 0o4755 }, "mode 0o4755, want permission bits only", false},
		{"dir mode bit", func(v *filesharepb.Version) { v.Mode = 1 << 31 }, "mode 0o20000000000", false},
		{"commit without files", func(v *filesharepb.Version) { v.CommitFiles = 0 }, "commit_files 0", false},
		{"files without commit", func(v *filesharepb.Version) { v.Commit = "" }, "commit_files 4 without a commit", false},
		{"too many commit files", func(v *filesharepb.Version) { v.CommitFiles = MaxCommitFiles + 1 }, "commit_files 1048577, at most 1048576", false},
		{"long commit", func(v *filesharepb.Version) { v.Commit = long }, "commit of 257 bytes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := valid()
			tc.edit(v)
			err := Validate(v)
			if err == nil {
				t.Fatalf("Validate accepted %v", v)
			}
			if !errors.Is(err, ErrBadManifest) {
				t.Errorf("%v does not wrap ErrBadManifest", err)
			}
			if errors.Is(err, safepath.ErrBadPath) != tc.isPath {
				t.Errorf("%v: wraps safepath.ErrBadPath = %v, want %v", err, !tc.isPath, tc.isPath)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %q, want it to say %q", err, tc.want)
			}
			if _, err := Encode(v); !errors.Is(err, ErrBadManifest) {
				t.Errorf("Encode = %v, want ErrBadManifest", err)
			}
			b, merr := proto.Marshal(v)
			if merr != nil {
				t.Fatal(merr)
			}
			if _, err := Decode(b); !errors.Is(err, ErrBadManifest) {
				t.Errorf("Decode = %v, want ErrBadManifest", err)
			}
		})
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	v := valid()
	v.Id, v.Path, v.Mode, v.Chunks[0].Seq = "", "/x", 0o1777, 0
	err := Validate(v)
	for _, want := range []string{`version "": `, "id empty", `path: safepath: bad path "/x": absolute`, "chunks[0] seq 0", "mode 0o1777"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
	if Validate(nil) == nil {
		t.Error("Validate(nil) = nil")
	}

	// Many problems make a short error.
	v = valid()
	for i := range 1000 {
		v.Chunks = append(v.Chunks, &filesharepb.ChunkRef{Origin: strings.Repeat("o", 1000+i)})
	}
	err = Validate(v)
	if err == nil || len(err.Error()) > 8<<10 || !strings.Contains(err.Error(), "more problems") {
		t.Errorf("Validate of 1000 bad chunks: %d bytes of error, want under 8 KiB ending in a count", len(err.Error()))
	}
}

func TestDecodeRefuses(t *testing.T) {
	chunkField := func(n int) []byte {
		var b []byte
		for range n {
			b = protowire.AppendTag(b, fieldChunks, protowire.BytesType)
			b = protowire.AppendBytes(b, nil)
		}
		return b
	}
	parentField := func(field protowire.Number, n int) []byte {
		var b []byte
		for range n {
			b = protowire.AppendTag(b, field, protowire.BytesType)
			b = protowire.AppendString(b, "p")
		}
		return b
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"garbage":          {[]byte{0xff, 0xff, 0xff}, "cannot parse"},
		"truncated":        {func() []byte { b, _ := Encode(valid()); return b[:len(b)-3] }(), "cannot parse"},
		"empty":            {nil, "id empty"},
		"too many chunks":  {chunkField(MaxChunks + 1), "1048577 chunks, at most 1048576"},
		"too many parents": {parentField(fieldParents, MaxParents+1), "65 parents, at most 64"},
		"too many kept":    {parentField(fieldKept, MaxParents+1), "65 kept, at most 64"},
		"too long":         {make([]byte, MaxBytes+1), "150994945 bytes, at most 150994944"},
		"bad utf-8 path": {
			protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "a\xff"),
			"invalid UTF-8",
		},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := Decode(tc.b)
			if err == nil {
				t.Fatalf("Decode accepted %v", v)
			}
			if !errors.Is(err, ErrBadManifest) {
				t.Errorf("%v does not wrap ErrBadManifest", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %.300q, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestToPlan(t *testing.T) {
	v := valid()
	v.Stable = true
	p := ToPlan(v)
	want := plan.Version{
		ID:      "us-east-1/1733000000000000000.0",
		Path:    "ckpt/step-100/__0_0.distcp",
		Parents: []plan.VersionID{"p1", "p2"},
		Kept:    []plan.VersionID{"p2"},
		Size:    v.Size,
		Mode:    0o644,
		MTime:   1733000000000000000,
		Content: plan.Hash(v.Content),
		Chunks: []plan.Chunk{
			{Hash: plan.Hash(hash(1)), Size: chunks.MaxSize},
			{Hash: plan.Hash(hash(2)), Size: chunks.MinSize},
			{Hash: plan.Hash(hash(1)), Size: chunks.MaxSize},
			{Hash: plan.Hash(hash(3)), Size: 10},
		},
		HLC:         plan.HLC{Wall: 1733000000000000001, Logical: 3},
		Origin:      "us-east-1",
		Commit:      "us-east-1/1733000000000000000.0",
		CommitFiles: 4,
		Stable:      true,
	}
	if !equalPlan(p, want) {
		t.Errorf("ToPlan = %+v\nwant     %+v", p, want)
	}
	if got := contentOf(p.Chunks); got != p.Content {
		t.Errorf("contentOf(ToPlan chunks) = %x, Content %x", got, p.Content)
	}
	// The result shares no memory with v.
	v.Content[0]++
	v.Parents[0] = "changed"
	if p.Content == plan.Hash(v.Content) || p.Parents[0] != "p1" {
		t.Error("ToPlan result changed with v")
	}

	tp := ToPlan(tombstone())
	if !tp.Deleted || tp.Chunks != nil || tp.Content != (plan.Hash{}) || tp.Kept != nil {
		t.Errorf("ToPlan(tombstone) = %+v", tp)
	}
}

func equalPlan(a, b plan.Version) bool {
	return a.ID == b.ID && a.Path == b.Path && slices.Equal(a.Parents, b.Parents) &&
		slices.Equal(a.Kept, b.Kept) && a.Deleted == b.Deleted && a.Size == b.Size &&
		a.Mode == b.Mode && a.MTime == b.MTime && a.Content == b.Content &&
		slices.Equal(a.Chunks, b.Chunks) && a.HLC == b.HLC && a.Origin == b.Origin &&
		a.Commit == b.Commit && a.CommitFiles == b.CommitFiles && a.Stable == b.Stable
}

func TestIsStripe(t *testing.T) {
	for name, want := range map[string]bool{
		"files": true, "files/1": true, "files/12": true, "files/999999999": true,
		"": false, "files/": false, "files/0": false, "files/01": false, "files/-1": false, "files/1x": false,
		"files/1/2": false, "kv": false, "file": false, "files1": false, "files/1234567890": false,
	} {
		if got := IsStripe(name); got != want {
			t.Errorf("IsStripe(%q) = %v, want %v", name, got, want)
		}
	}
}
