// Package plan holds the sync decisions of file sharing, free of IO: which
// version of a path a share shows, which concurrent versions become
// conflict copies and under which name, and what a client must do to make
// its folder match (upload, fetch, make visible, record a delete, or stop).
//
// It imports only the standard library, reads no clock and starts no
// goroutines (TestImports holds it to that): the same inputs give the same
// answer at every site and in every test.
//
// # Usage
//
// The site stores versions (records in the replicated KV) and marks each
// Stable once it and its chunks are persisted where the share's predicate
// says. A client passes every version its site knows for the share, stable
// or not, to Resolve, and the View with its folder's three trees to Decide:
//
//	view := plan.Resolve(versions)
//	d := plan.Decide(plan.Input{View: view, Local: scan, Base: base, Commit: rule})
//	if d.MassDelete != nil { return d.MassDelete } // ask the user
//	for _, a := range d.Actions { execute(a) }     // in order
//
// The executor re-checks Expect right before it renames a fetched file into
// place (or removes one) and skips the action on mismatch; the next round
// decides again. After an Upload or Download it records Base from the
// local stat right after; after an Adopt, from Expect; after a Tombstone,
// TombstoneBase; after a Remove it drops the Base.
//
// # Resolve
//
//   - Only stable versions are shown: showing one earlier could make a
//     file visible whose bytes a site failure would take back.
//   - A stable version with an ancestor not known (a parent, or a parent's
//     parent) is pending ("waiting for parent"): a site may apply a child's
//     record before its parent's, and without the whole line it cannot
//     tell what the child supersedes (older versions would look concurrent
//     and become spurious conflict copies).
//   - Versions with one Commit are shown together once all CommitFiles of
//     them are known and stable (and none waits for a parent); until then
//     the stable ones are pending ("incomplete commit"). A checkpoint is
//     useful whole or not at all.
//   - Ancestry is transitive over all known versions, stable or not. The
//     heads of a path are the showable versions there that no other
//     showable version there descends from.
//   - The winner among heads: a file beats a tombstone (delete against
//     edit: the edit wins, reported as Conflict Kind "delete", so a delete
//     never loses someone's concurrent work); then the higher HLC, the
//     greater origin, the greater id. The order is total, so every site
//     picks the same winner.
//   - A losing file head whose bytes differ from the winner's is shown as
//     a conflict copy at ConflictName(path, loser) (Kind "edit"); equal
//     bytes merge silently; a losing tombstone makes no copy.
//   - Copies are sticky: every id in the Kept of a version at a path keeps
//     its copy shown while it is known, showable and not a tombstone,
//     although the version descends from it. Writers name the copies they
//     saw (Heads.Kept), so resolving a conflict at the original does not
//     make the copy vanish.
//   - A copy is a virtual version at the copy path carrying the loser's id.
//     A later edit or delete of the copy names that id as parent and so
//     supersedes it there; the copy path is resolved from the virtual
//     version and the versions stored at it by the same rules, except that
//     the virtual version beats a head written there without having seen
//     it (else its own copy would be named like the path it loses at).
//     A copy of a copy is named after the original, never nested.
//   - The copy's tag is a sha256 prefix of the loser's id: short, safe in
//     any file system whatever the origin's name, the same at every site.
//   - Heads[path] lists the current heads, winner first, and Kept the
//     losing heads shown as copies; it exists also when the winner is a
//     tombstone, so a later re-create descends from the delete instead of
//     conflicting with it.
//   - Conflicts list the current conflicts among heads only; a copy kept
//     by a later writer is shown but no longer a conflict.
//
// # Decide
//
// Three trees, after Dropbox's Nucleus: the View (remote), Local (the
// folder now) and Base (what this client last synced at each path).
//
//   - Local unchanged: the stat (size, mtime, mode) equals the Base's, or
//     the file is hashed and has the Base's content and mode (a touch). A
//     changed stat without a hash asks for ActHash first. Only settled
//     files are hashed or published: a file still being written is left
//     alone, so no half-written file is ever published.
//   - Remote changed: the view shows another version than the Base (or
//     none), and the Base's version is one the view could show. A Base the
//     view cannot show yet is this client's own upload (or delete) on its
//     way to stable: fetching the older version shown meanwhile would undo
//     the user's write for a while, so the path waits, and a further local
//     change is published on top of that Base.
//   - Local changed, remote unchanged: upload on Heads (Parents and Kept),
//     or on nothing for a new path. Deleted here: a tombstone on Heads.
//   - Remote changed, local unchanged: download (or remove when no longer
//     shown) with Expect, the local file the decision was made on.
//   - Both changed: equal bytes adopt the remote version; otherwise the
//     local file is uploaded on its Base version, concurrent with the
//     remote one, which Resolve turns into a conflict copy everywhere. A
//     local change the client has not published is never overwritten. A
//     delete here against an edit there is recorded the same way, and the
//     edit wins.
//   - A local file without a Base where the view shows one: equal bytes
//     adopt, else a concurrent upload (a conflict, nothing lost).
//   - A Base with zero Content (TombstoneBase) is a delete this client
//     published: while the view cannot show it, nothing is fetched there
//     and a re-create is published on top of it; once it can, the path is
//     decided as if never synced, and an ActRemove with nil Expect tells
//     the executor to forget the Base when nothing is shown there.
//   - Commit dirs (CommitRule.CommitDir, when Marker is set): nothing
//     under a dir is published until <dir>/<Marker> is present and
//     settled and every changed file there is settled and hashed; then
//     every change there (uploads and tombstones) carries Commit = dir,
//     the marker included, last, republished even if unchanged: it is the
//     commit's signature. While the marker's own remote version changed,
//     the commit waits for it. Without a marker, deletes alone are one
//     commit (a dir removed as a whole, or a marker removed before a
//     rewrite) if nothing is being written there. A remote delete of the
//     marker is not applied while files there wait to be published (that
//     would strand them); the marker is published again on its Base
//     instead, and beats the delete.
//   - Order: hashes and adopts, then publishes (markers last), then
//     downloads of new paths, then downloads over existing files, then
//     removes, then commit markers. A conflict copy (a new path) is thus
//     written before the file it came from is replaced, and a received
//     commit shows its marker only once its files are in place.
//   - Mass delete: when the folder itself is missing, or more than half of
//     at least MassDeleteMin synced files vanished locally while the share
//     still shows them, Decide returns MassDelete and no action at all (an
//     unmounted disk must not delete everything everywhere), unless
//     AllowMassDelete.
//   - Conflict copies are ordinary paths here.
//
// # Testing
//
// TestModel simulates a site and two or three clients with in-memory
// folders through random user operations and interleaved, partly executed
// sync rounds, then quiesces and checks convergence, that no uploaded
// content is lost unless a user who had it overwrote or deleted it, that
// nothing unstable or half a commit is made visible, and that no local
// content is overwritten unless published or seen. A failure prints its
// seed and a command that replays it with a step log.
package plan
