// Package fileshare is the site side of file sharing: it stores file
// chunks at the site and replicates them to the other sites through the
// library's files stream, records file versions through the KV, and tells
// clients which versions are stable: the manifest and every chunk it names
// persisted where the share's visibility predicate says.
//
// The one idea: a version is its manifest in the KV plus chunk references
// (origin, seq) into the sites' files streams, so its stability is read off
// frontiers the library already keeps: the KV stream's frontier at the
// manifest's seq, and the files streams' frontiers at its chunks' seqs,
// under the visibility predicate. Nothing is visible elsewhere before that
// holds; what to show, what is a conflict and what a client must do is
// decided by package plan, the same at every site and client.
//
// Chunks travel on a bulk stream (Node.HandleBulk): a lane and a connection
// of their own, so a checkpoint streaming across an ocean delays neither
// KV writes nor acks. Other sites' clients fetch a version's chunks as
// soon as its manifest and chunks reach their site, and show it once it is
// stable. A version may also be recorded before its chunks (an early
// commit: chunks named by hash, located by hash at each site as they
// arrive); stabsync does not use it yet (see package client).
//
// # Usage
//
//	svc, err := fileshare.New(fileshare.Config{Node: node, KV: store}) // before node.Start
//	err = svc.Start()                                                   // after
//	filesharepb.RegisterFileShareServer(grpcServer, fileshare.NewServer(svc))
//	defer svc.Close()                                                   // before node.Close
//
// # Storage
//
// Namespace "fileshare" of the node: "l"+hash → where the chunk lives
// (origin, seq of that origin's files stream), written by the applier in
// the batch that records how far it applied the stream. The chunk's bytes
// are that entry's payload, read back from the site's log (Node.ReadEntry),
// so a site writes each chunk once, whoever sent it, and holds it once
// (deduplicated per site); the stream's log must keep such an entry while
// a retained version names it. Shares are KV keys /fs/shares/NAME;
// versions /fs/v/SHARE/PATH\x00ID, one key per version, never overwritten,
// so concurrent versions are never lost to last-writer-wins: the KV keeps
// them all and plan.Resolve picks.
//
// # Concurrency
//
// A Service is safe for concurrent use. Service.mu guards the own chunks
// appended and not yet applied, and the clock of version ids; it is a leaf,
// never held across IO.
package fileshare
