package chunks

import (
	"crypto/sha256"
	"fmt"
	"io"

	"github.com/restic/chunker"
)

// The chunking parameters. They are part of the format: every site and
// client must cut the same chunks from the same bytes, so changing any of
// them (or Polynomial) makes every file look new to deduplication. It
// stays correct, only unshared.
const (
	// MinSize is the smallest chunk, except the last of a file.
	MinSize = 192 << 10
	// AvgSize is the mean chunk size on random data: MinSize plus the
	// mean distance 1<<averageBits from there to a cut (384 KiB).
	AvgSize = MinSize + 1<<averageBits
	// MaxSize is the largest chunk; a chunk this big was cut by size, not
	// content. PutChunkRequest carries at most 8 MiB.
	MaxSize = 8 << 20

	averageBits = 18
)

// Polynomial is the irreducible polynomial of the Rabin fingerprint, fixed
// so that every site cuts the same chunks (restic's own tests use it).
const Polynomial = chunker.Pol(0x3DA3358B4DC173)

// Chunk is one content-defined piece of a file.
type Chunk struct {
	Hash   [32]byte // SHA-256 of the bytes: the chunk id
	Offset int64    // where it starts in the file
	Size   uint32   // in (0, MaxSize]
}

// Split reads r to the end and calls fn for each chunk in order with its
// bytes. data is only valid during the call: Split reuses one buffer, so
// its memory stays O(MaxSize) whatever the length of r. An empty r has no
// chunks. Split stops at the first error, from r or from fn, and returns it
// wrapped with the offset of the chunk it was at.
func Split(r io.Reader, fn func(c Chunk, data []byte) error) error {
	ch := chunker.NewWithBoundaries(r, Polynomial, MinSize, MaxSize)
	ch.SetAverageBits(averageBits)
	buf := make([]byte, MaxSize)
	var off int64
	for {
		c, err := ch.Next(buf)
		if err == io.EOF { // the chunker's end, never a reader's wrapped EOF
			return nil
		}
		if err != nil {
			return fmt.Errorf("chunks: read chunk at offset %d: %w", off, err)
		}
		chunk := Chunk{Hash: Sum(c.Data), Offset: off, Size: uint32(c.Length)}
		if err := fn(chunk, c.Data); err != nil {
			return fmt.Errorf("chunks: chunk at offset %d: %w", off, err)
		}
		off += int64(c.Length)
	}
}

// Sum returns the id of a chunk's bytes: their SHA-256.
func Sum(data []byte) [32]byte {
	return sha256.Sum256(data)
}
