package workload

import (
	"crypto/sha256"
	"fmt"
	"testing"
)

// TestRecordsUnchanged: the generator writes the records it wrote when it
// lived in cmd/wanbed (the first 50 of two regions, hashed), so that runs
// stay comparable with the earlier ones in deploy/bench.
func TestRecordsUnchanged(t *testing.T) {
	h := sha256.New()
	for i, s := range []string{"us-east-1", "ap-southeast-2"} {
		g := NewGen(s, uint64(1000+i))
		for range 50 {
			r := g.Next()
			fmt.Fprintf(h, "%s\x00%s\x00", r.Key, r.Value)
		}
	}
	const want = "da882a79ed2729a3604fd5ab1cd22447ce6813626966b9fd5ebf6ba5ea8e1fce"
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != want {
		t.Fatalf("records hash %s, want %s: the workload changed", got, want)
	}
}
