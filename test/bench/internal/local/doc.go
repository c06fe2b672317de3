// Package local holds the small host-side helpers the bench's drivers
// share: reserving free loopback ports for processes they start, and a
// sleep that ends with its context.
//
// # Usage
//
//	addrs, err := local.FreePorts(3) // "127.0.0.1:NNNN", free when it returns
//	err = local.Sleep(ctx, 200*time.Millisecond)
package local
