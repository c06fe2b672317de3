// Package chunks is a throwaway stand-in for fileshare/chunks until branch
// pieces lands: fixed-size chunks.
package chunks

import (
	"crypto/sha256"
	"errors"
	"io"
)

const MaxSize = 8 << 20

type Chunk struct {
	Hash   [32]byte
	Offset int64
	Size   uint32
}

func Sum(data []byte) [32]byte { return sha256.Sum256(data) }

func Split(r io.Reader, fn func(c Chunk, data []byte) error) error {
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if e := fn(Chunk{Hash: Sum(buf[:n]), Offset: off, Size: uint32(n)}, buf[:n]); e != nil {
				return e
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
