package fileshare

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// BenchmarkReplicateChunks measures the sites' cost per byte of a chunk:
// stored at us-east-1, replicated to two sites and stored there, on the
// in-memory test network (no bandwidth limit: what it measures is CPU and
// disk). Profile with -cpuprofile to see where a byte's time goes.
func BenchmarkReplicateChunks(b *testing.B) {
	c := newCluster(b, sites3...)
	const chunk = 1 << 20
	data := make([]byte, 64*chunk)
	r := rand.NewChaCha8([32]byte{7})
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := range b.N {
		_, _ = r.Read(data)
		for off := 0; off < len(data); off += chunk {
			piece := data[off : off+chunk]
			if _, _, err := c.svc(us).chunks.put(ctxT(b), sha256.Sum256(piece), piece); err != nil {
				b.Fatal(err)
			}
		}
		last := sha256.Sum256(data[len(data)-chunk:])
		for _, s := range []string{eu, ap} {
			stabilizertest.Eventually(b, 0, func() error {
				if _, ok, _ := c.svc(s).chunks.lookup(last); !ok {
					return fmt.Errorf("round %d: %s lacks the last chunk", i, s)
				}
				return nil
			})
		}
	}
}
