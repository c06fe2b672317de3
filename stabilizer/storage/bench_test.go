package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkWrite measures durable appends: writers goroutines each append to
// their own stream, batch messages per Write, until b.N messages are written.
// It reports messages/s, payload MB/s and Writes per WAL fsync.
func BenchmarkWrite(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		for _, batch := range []int{1, 16, 256} {
			if size > 4096 && batch > 16 {
				continue
			}
			for _, writers := range []int{1, 4, 16, 64} {
				name := fmt.Sprintf("size=%d/batch=%d/writers=%d", size, batch, writers)
				b.Run(name, func(b *testing.B) { benchWrite(b, size, batch, writers) })
			}
		}
	}
}

func benchWrite(b *testing.B, size, batch, writers int) {
	s, err := Open(Config{Dir: b.TempDir(), Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pay := make([]byte, size)
	for i := range pay {
		pay[i] = byte(i)
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var writes atomic.Int64
	syncs0 := s.walSyncs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("w%d", w)
			var next uint64 = 1
			ms := make([]Message, batch)
			for {
				n := int(min(int64(batch), left.Add(-int64(batch))+int64(batch)))
				if n <= 0 {
					return
				}
				for i := 0; i < n; i++ {
					ms[i] = Message{Seq: next, HLC: next, Payload: pay}
					next++
				}
				var bt Batch
				bt.Append("origin", stream, ms[:n]...)
				if err := s.Write(context.Background(), &bt); err != nil {
					b.Error(err)
					return
				}
				writes.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	b.StopTimer()
	syncs := s.walSyncs() - syncs0
	b.ReportMetric(float64(b.N)/el, "msgs/s")
	// CPU per message counts pebble's background work too, and is less
	// sensitive than time to what else the machine runs.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(b.N)*float64(size)/el/1e6, "MB/s")
	if syncs > 0 {
		b.ReportMetric(float64(writes.Load())/float64(syncs), "writes/fsync")
	}
}

// BenchmarkPebbleSyncApply measures pebble alone: writers goroutines each
// commit one 256-byte Set per batch with Sync. Commits/s far above the
// single-writer rate show that pebble's commit pipeline shares one WAL fsync
// among concurrent synced commits.
func BenchmarkPebbleSyncApply(b *testing.B) {
	for _, writers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: pebbleLogger{hclog.NewNullLogger()}})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			val := make([]byte, 256)
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := make([]byte, 16)
					binary.BigEndian.PutUint64(key, uint64(w))
					for i := uint64(0); left.Add(-1) >= 0; i++ {
						binary.BigEndian.PutUint64(key[8:], i)
						if err := db.Set(key, val, pebble.Sync); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
