// Package filesharetest runs fake file-sharing sites in a test's process:
// gRPC servers of filesharepb.FileShareServer on 127.0.0.1 port 0 that share
// one in-memory Cluster (shares and versions, as the KV would replicate
// them), each with a chunk set of its own. They implement what
// fileshare.proto says well enough to test a sync client with: shares,
// Missing, PutChunks checked against their hashes (answered with refs
// spread over two files streams, as a site of three stores them), Commit
// that needs every chunk held at its site and waits for stability, List
// with stable and persisted_at and, given a cursor, only what changed
// since, Watch, GetChunks with held = false for chunks that have not
// arrived. Nothing is persisted or replicated for real and no predicate is
// evaluated: a version is stable unless the test holds it, and a chunk put
// at one site is at every other at once unless the test holds its arrival
// there. Version history is never trimmed (keep_versions is stored, not
// applied).
//
// # Usage
//
//	cl := filesharetest.NewCluster()
//	a, b := cl.Start(t, "us-east-1"), cl.Start(t, "eu-west-1")
//	cl.CreateShare(t, &filesharepb.Share{Name: "ckpt", CommitMarker: ".metadata"})
//	cl.HoldStability(true) // versions recorded from now on are not stable
//	cl.ReleaseAll()        // until released
//	b.HoldChunks(true)     // chunks put elsewhere do not arrive at b
//	b.FailGetChunksAfter(3) // b's next GetChunks fails after 3 chunks
//	a.HoldPutChunks(true)   // a's PutChunks streams hold their answers back
//	st := a.PutStreams()    // how many are open, held, bytes unanswered
//	cl.Inject(t, "ckpt", v) // record a version as given, unchecked
//	cl.Forget(id)           // drop a version, as a delete of its record would
//	cl.ResetCursors()       // every cursor void, as after a site's restart
//	cl.NoCursors(true)      // answer every List in full, as an older site
//	full, delta := a.Lists() // how a's Lists of a whole share were answered
//	cl.WaitFor(t, "two versions", func() bool { return len(cl.Versions()) == 2 })
//
// # Concurrency
//
// A Cluster and its Servers are safe for concurrent use: one mutex, the
// Cluster's, guards every site's state and is never held across IO. Every
// wait in a test goes through WaitFor, which wakes on each change of the
// cluster's state and fails the test after 10 s.
package filesharetest
