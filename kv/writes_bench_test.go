package kv

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkClientWrites: writes from 16 goroutines per CPU through one
// Client to a one-site cluster in this process, waiting for nothing, so
// that the cost measured (CPU and allocations per write, both ends) is
// the API's and the append's: on the stream and as unary requests.
func BenchmarkClientWrites(b *testing.B) {
	for _, unary := range []bool{false, true} {
		b.Run(map[bool]string{false: "stream", true: "unary"}[unary], func(b *testing.B) {
			c := newCluster(b, "us-east-1")
			cl, _ := c.serve("us-east-1", nil)
			cl.Unary = unary
			ctx := ctxT(b)
			value := make([]byte, 256)
			var n atomic.Int64
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cl.Put(ctx, fmt.Sprintf("k/%d", n.Add(1)), value, "none", 0); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
