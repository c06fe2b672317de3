// Package stabilizertest is the test harness for applications built on the
// stabilizer library, and for the library's own tests: an in-memory network
// with per-link delays and cuts, a cluster of N sites over real storage in
// t.TempDir(), a logger that writes to t.Log, and a polling helper with a
// deadline.
//
// The one idea: a test of a multi-site application should need no sockets,
// no sleeps and no harness of its own. It names its sites, registers its
// application on each node as the node starts (Options.Setup), and drives
// the sites through Stop, Start, Isolate and the network's delays, on the
// same storage and the same Node a real site runs.
//
// # Usage
//
//	c := stabilizertest.NewCluster(t, stabilizertest.Options{
//		Sites: []string{"us-east-1", "eu-west-1", "ap-south-1"},
//		Setup: func(site string, n *stabilizer.Node) error {
//			return n.Handle("log", myApplier) // before Start, at every start
//		},
//	})
//	a, err := c.Node("us-east-1").Append(ctx, "log", payload)
//	c.Isolate("ap-south-1", true)              // cut it off
//	c.Net.SetDelay("us-east-1", "eu-west-1", 40*time.Millisecond)
//	c.Stop("eu-west-1"); c.Start("eu-west-1") // a clean restart on the same folder
//	stabilizertest.Eventually(t, 0, func() error { ... })
//
// Everything a Cluster starts is stopped by t.Cleanup, before the folders
// are removed; Logger stops writing once the test is over.
//
// # Concurrency
//
// Network and Cluster are safe for concurrent use. The network delivers
// each link's frames in order from one goroutine per link and plane, after
// the link's delay; a cut link drops what it carries.
package stabilizertest
