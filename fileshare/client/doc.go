// Package client is the engine of stabsync, the file-sync client: it keeps
// one folder and one share of the sites' file-sharing API
// (fileshare/filesharepb) in step, both ways. Local changes are found by
// notifications (fsnotify, every directory), periodic rescans and the
// site's Watch stream; a file is published only once its size and mtime
// stayed the same for the settle time, and a directory matching the
// share's commit rule only when its marker file appears, as one commit.
// Versions of other sites become visible only once the site says they are
// stable, and are written atomically (temp file, fsync, rename, directory
// fsync; a commit's directory with one rename when it is new), never over
// a local change the planner has not seen.
//
// What to do is decided by package plan (Resolve, then Decide) from the
// folder's scan, the site's List and the index; this package only does
// the IO, action by action, in the order Decide gives.
//
// The client keeps the share's list between rounds (view.go): after the
// first full List it asks its site only for what changed since its cursor
// (ListRequest.since) and applies that, so a change of a share with a long
// history costs the site and the wire the change, not the history. It
// lists in full again when the site does not know its cursor (another
// site after a failover, a restarted one, an older release that gives no
// cursor) and every Options.FullListInterval as a safety net. The planner
// is given every version held, exactly what a full List would say; a round
// in which nothing changed at the site reuses the last Resolve.
//
// # Usage
//
//	_, err := client.Init(ctx, "/data/ckpt", client.Config{Sites: []string{"10.0.1.5:7003"}, Share: "ckpt"},
//		client.InitOptions{Create: true, Share: client.Share{CommitMarker: ".metadata", CommitDirs: "step-*"}})
//	s, err := client.Open("/data/ckpt", client.Options{Logger: log, Progress: bars})
//	defer s.Close()
//	err = s.Run(ctx)             // until ctx ends
//	res, err := s.SyncOnce(ctx)  // or one round at a time
//	st, err := s.Status(ctx)     // per file: synced, local, uploading, pending, ...
//	hist, err := s.Versions(ctx, "a/b.txt")
//	id, err := s.Restore(ctx, "a/b.txt", hist[0].ID)
//	cs, err := s.Conflicts(ctx)
//
// # The folder's state
//
// <folder>/.stabsync (never synced) holds config.json (Config), index.json
// (per path the version last synced there and the stat right after, and
// per local file its chunk list as of its stat, so that a file is chunked
// once; written atomically after every action, so it survives kill -9),
// partial/ (per version being downloaded, its file assembled in place as
// chunks arrive, so that once it is stable only an fsync and the rename are
// left; checked chunk by chunk when reopened after a restart, so that an
// interrupted download resumes from what it fetched), tmp/ (temp files of
// assembly, removed by Open), lock (one Run per folder) and status.json
// (what the running process is doing, for stabsync status).
//
// A downloaded byte is written once: into the version's partial file,
// which becomes the file by a rename. There is no chunk cache (earlier
// releases kept one in chunks/, which Open removes). A chunk needed again,
// at another offset or by another version fetched in the same round, is
// copied from the partial file it landed in, or from a local file whose
// chunk list the index knows, and checked against its hash on the way.
//
// # Paths
//
// Every file access goes through an os.Root on the folder, so no symlink
// leads out of it, and a version's path is used only after safepath.Check
// (a bad one is logged, reported in Result.Refused and skipped); a
// version is never written through a symlinked directory inside the
// folder either. On a case-folding filesystem (probed by Init) of paths
// that fold together only the lexically first is materialized. The
// ignore file .stabignore (gitignore syntax) names paths not synced, both
// ways.
//
// # Concurrency
//
// Run owns two goroutines (notifications, the site's Watch stream), which
// only kick the round loop; rounds (Run's, SyncOnce's) run one at a time
// under runMu, which owns the index. A round uploads side by side: it
// prepares each upload (the index's chunk list, hashing if needed) and
// starts it on a goroutine of its own, which pushes the files' chunks, at
// most Options.Uploads files at once and within Options.UploadBytes of
// chunk bytes not yet answered by the site, and commits them; the round
// waits for its uploads before an action of another kind and before it
// ends, and records them in the index itself. Uploads touch neither the
// index nor the partial files. mu guards what Status reads (transfers,
// state) and is never held across IO; saveMu serialises the writes of the
// status file, from the round and its uploads, and is held across them.
// The order is runMu, saveMu, mu. Close waits for Run's goroutines.
// Progress is called from the round's goroutine and its uploads'.
package client
