// Package loadgen drives closed-loop write load for the benchmarks: a fixed
// number of writers, each issuing its next write as soon as the last one
// returns, measured over a window after a warm-up.
//
// The one idea: only writes that complete inside the measured window count,
// so the throughput of different systems is compared over the same span,
// whatever they did during warm-up or the tail.
//
// # Usage
//
//	res := loadgen.ClosedLoop(ctx, 256, 256, 2*time.Second, 8*time.Second,
//		func(ctx context.Context, worker int, key string, value []byte) error {
//			return clients[worker%len(clients)].Put(ctx, key, value)
//		})
//	fmt.Println(len(res.Lat), "writes in the window;", res.Errors, "failed")
//
// # Concurrency
//
// ClosedLoop starts one goroutine per writer and returns once all of them
// have stopped; put is called from all of them at once.
package loadgen
