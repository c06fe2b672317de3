// Package fileshare is the site side of file sharing: it stores file
// chunks at the site and replicates them to the other sites through the
// library's files streams, records file versions through the KV, and tells
// clients which versions are stable: the manifest and every chunk it names
// persisted where the share's visibility predicate says.
//
// The one idea: a version is its manifest in the KV plus chunk references
// (origin, stream, seq) into the sites' files streams, so its stability is
// read off frontiers the library already keeps: the KV stream's frontier at
// the manifest's seq, and each files stream's frontier at the highest seq
// of the version's chunks in it, under the visibility predicate. Nothing
// is visible elsewhere before that holds; what to show, what is a conflict
// and what a client must do is decided by package plan, the same at every
// site and client.
//
// Chunks travel on bulk streams: a lane and a connection of their own, so a
// checkpoint streaming across an ocean delays neither KV writes nor acks.
// A site's chunks form one striped transfer, Stream (Node.HandleStriped):
// one bulk stream per peer of the site, "files", "files/1", …, stripe i
// sent by its origin to the origin's i-th peer only, which relays it to
// the others as it persists it (the origin sends it to a peer itself
// while that relay stalls). Appends are spread over the stripes by bytes
// (Node.AppendStriped), so every link into a receiver carries part of a
// transfer, from the origin and from the other receivers, and each byte
// still reaches each site once: with three sites, each receiver gets half
// of a checkpoint from the origin and half from the other receiver. Other
// sites' clients fetch a version's chunks as soon as its manifest and
// chunks reach their site, and show it once it is stable. A version may
// also be recorded before its chunks (an early commit: chunks named by
// hash, located by hash at each site as they arrive); stabsync does not
// use it yet (see package client). PutChunks stores what arrived together
// with one append to the files transfer.
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
// (origin, files stream, seq of that stream), written by the applier in
// the batch that records how far it applied the stream. The chunk's bytes
// are that entry's payload, read back from the site's log (Node.ReadEntry),
// so a site writes each chunk once, whoever sent it, and holds it once
// (deduplicated per site); the stream's log keeps such an entry while a
// chunk is located at it (see Garbage collection). "e"+stream+seq → what
// entry seq of a files stream holds (chunk hash, size, whether it is a
// relocation): the collector's index of the logs, written with the entry's
// application, deleted with its truncation. An entry's payload is the
// chunk's bytes alone (an upload), or a marker, the chunk's hash and its
// bytes (a relocation, entries.go). Shares are KV keys /fs/shares/NAME;
// versions /fs/v/SHARE/PATH\x00ID, one key per version, never overwritten
// (but by its pruned stub), so concurrent versions are never lost to
// last-writer-wins: the KV keeps them all and plan.Resolve picks. A site
// that lost a chunk a version names asks for it under /fs/want/SITE/HASH.
//
// Sites from before transfers were striped wrote one files stream,
// "files", which is stripe 0 of the transfer now, so its entries, frontiers
// and acks go on as they were. Every record of stream "files" keeps the
// format of before: a location is origin, seq, size (another stripe's adds
// its stream's name at the end), an index key "e", the origin (length
// first) and the seq (another stripe's names origin+"\x00"+stream where
// the origin was: no site's name holds a NUL byte, New refuses one), and a
// chunk ref of a version leaves its stream empty (filesharepb.ChunkRef:
// empty means "files"). So a site's store and the versions in the KV from
// before read as refs into "files", served and collected as any.
//
// # Garbage collection
//
// History retention (Prune) turns superseded versions into stubs that name
// no chunks; the collector (Service.GC, every GCInterval) then reclaims the
// chunks nobody names, at each site on its own. Only a prefix of a stream
// can be dropped (Node.Truncate), so collection is log-structured:
//
//   - Live set. A chunk is live at a site if a version record in its KV
//     that is not a pruned stub names it: every record under /fs/v/, of
//     every share, stable or not (a version not yet stable may still
//     become visible), early commits included (named by hash), read from
//     the KV's latest local state, own writes not yet applied included.
//     A commit in progress holds the chunks it resolved until its records
//     are written.
//   - Grace. A chunk found dead is only a candidate: it is dropped once
//     every collection for GCGrace (default 10 min) found it dead, with no
//     sign of life between: an upload or lookup of it (Missing, PutChunks
//     of bytes held already), an entry of it applied. Clients upload chunks
//     before they commit, and a version committed elsewhere may still be
//     on its way. Candidates live in memory: after a restart the period
//     starts over, never shorter.
//   - Dropping forgets a chunk's location; while that commits, lookups say
//     the chunk is not held, so no commit names it and an upload stores it
//     again.
//   - Truncation. Each site truncates each files stream, every stripe of
//     its own transfer and its copies of the others', up to the lowest
//     entry a chunk is located at in that stream, minus one, and never
//     beyond what it applied (what it has not applied may be located
//     next). Truncate also stops short of what a peer has not persisted;
//     the next collection goes further.
//   - Relocation. One live chunk at the start of a stream would hold the
//     whole stream, so a site rewrites the live chunks located in a mostly
//     dead prefix of each of its own stripes (live at most RelocateRatio, a
//     quarter, of the prefix's bytes, and freeing more than plain
//     truncation would; at most MaxRelocateBytes a collection over all
//     stripes; none of it still in its grace period) as relocation entries
//     at the transfer's head, through the path uploads take (AppendStriped:
//     on whichever stripe), waits until it applied them, and truncates the
//     prefixes. A relocation entry moves the chunk's location at every site
//     that applies it (an upload of bytes a site holds changes nothing
//     there: it is not stored twice), so every site can then drop its copy
//     of the prefix too. A chunk located in another stripe, or beyond the
//     prefix, needs no move: only locations hold a stream back.
//
// Why nothing that can be shown is collected: a location is deleted only
// for a chunk no retained version names (checked again under the lock the
// applier takes, so a location an entry just wrote survives), the
// truncation of a stream stops below the lowest location into it, and
// locations only ever move to entries applied after the positions the
// truncation read (per stream: a location written after the positions were
// read is of an entry beyond the position of its stream, whichever it is);
// the deletions are committed before the truncation in the site's one log,
// so a crash never leaves a location below a floor. The
// stability of a version is read off frontiers, which truncation does not
// move, so a version that was stable stays stable.
//
// What a site cannot know: a version committed at another site that names,
// by deduplication, a chunk this site holds for no version it knows (the
// version that named it pruned, the new one still on its way: a link down
// for longer than GCGrace). This site may drop the chunk before the version
// arrives. When it arrives, the collector finds a retained version naming a
// chunk not held here although its entry was applied, and asks the
// version's origin for it (/fs/want/SITE/HASH): that site holds it, since
// the version is live there, and sends it again as a relocation entry (on
// any of its stripes).
// Meanwhile a download says the chunk is not held, as for one on its way.
//
// A download of a chunk the site collected lately fails with ErrChunkGone
// (NotFound); one below a floor would too, but no located chunk is.
//
// # Incremental lists
//
// A client that holds a share's list asks only for what changed since its
// cursor (ListChanges, ListRequest.since): per share the site keeps a log
// of changes, fed by one watch of the KV on the versions prefix and by its
// own Commit and Prune at once, and marks again at each such List only the
// versions whose marks may still change (not yet stable and persisted
// everywhere). A delta thus costs the site its open versions and what
// changed, and carries what changed, not the history. Watch sends an
// event once the log holds the change it announces. changes.go has the
// details.
//
// # Concurrency
//
// A Service is safe for concurrent use. Service.mu guards the clock of
// version ids and the last collection's stats; chunkStore.mu guards the own
// chunks and entries appended and not yet applied (with their hashes, so
// that the applier does not hash them again) and the collector's
// candidates, holds and floors. Both are leaves, never held across IO.
// chunkStore.writeMu serialises the applier's and the collector's writes
// of locations, each a read of the locations it changes and an unsynced
// commit; it comes before chunkStore.mu. Service.gcSem admits one
// collection at a time and guards Service.gc. Service.lists (the shares'
// change logs) is a leaf; a shareLog's refreshMu serialises its
// refreshes, held across their reads of frontiers and ack tables, and
// comes before the log's mu, a leaf. One goroutine of the service watches
// the KV's version records for the logs.
package fileshare
