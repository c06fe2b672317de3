// Package safepath checks the file paths that arrive from the network
// before a sync client lets them near its folder, and finds the paths that
// would land on one file of a case-insensitive filesystem.
//
// A path is share-relative and slash-separated, and names a file. Check
// refuses (wrapping ErrBadPath, with the path and the reason): the empty
// path; an absolute path ("/a"); a Windows drive ("C:", "c:x") or UNC form
// ("\\host"), and any backslash; any segment "", "." or ".."; a trailing
// slash; NUL or any other control character (unicode.IsControl: C0, DEL and
// C1); invalid UTF-8; a segment longer than MaxSegment bytes or a path
// longer than MaxPath bytes; and any segment that is the client's state
// directory StateDir in any case or normalization (".STABSYNC", and even
// ".ſtabsync", whose long s folds to s). A path Check accepts is clean
// (path.Clean leaves it alone) and, joined to any root, stays under it.
//
// Names Windows cannot hold (CON, aux.txt, "a:b", trailing dots or spaces,
// <>:"|?*) are not refused: clients run on Linux and macOS, where they are
// ordinary names. A Windows client would need its own rules on top.
//
// Check alone does not make a path safe to open: a directory of the folder
// may be a symlink a user (or an earlier sync) made that points outside it.
// The client therefore never opens a path from the network with os.Open
// or filepath.Join; it opens the folder once with os.OpenRoot and goes
// through the *os.Root for everything: OpenFile and Create (the temporary
// file), Mkdir and MkdirAll (parents), Rename (the temporary file onto its
// name, atomically), Remove, Lstat and Stat, Chmod and Chtimes (mode and
// mtime), and Open(dir) then Sync for the directory fsync. Each refuses a
// path that escapes the root through "..", an absolute symlink or a symlink
// to outside (root_test.go shows it), while symlinks that stay inside the
// folder still work. os.Root has had Rename since Go 1.25, so this package
// needs no Rename of its own.
//
// Case-insensitive filesystems (macOS's default APFS, Windows) hold one file
// for "A.txt" and "a.txt", and macOS one for "é" composed (NFC) and
// decomposed (NFD). FoldKey is the key under which such names meet:
// canonical decomposition (golang.org/x/text/unicode/norm), then simple case
// folding rune by rune, then decomposition again. Folding, not
// strings.ToLower: case-insensitive comparison is defined by folding, and
// lowering misses pairs that folding joins (final sigma "ς" and "σ").
// Simple, not full, folding: these filesystems map one character to one ("ß"
// and "ss" stay two files on APFS and NTFS). And not
// golang.org/x/text/cases.Fold, the first try: FuzzCheck found it is not
// idempotent (Cherokee U+AB90 folds to U+13C0, which it folds back to
// U+AB90), so one name could have two keys; the least rune of a
// unicode.SimpleFold orbit is a fixed point by construction. Collisions
// groups the paths of a share by FoldKey, and the client refuses all but the
// first of each group it sees.
//
// # Usage
//
//	if err := safepath.Check(v.Path); err != nil {
//		return err // errors.Is(err, safepath.ErrBadPath)
//	}
//	root, err := os.OpenRoot(folder)
//	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
//	err = root.Rename(tmp, v.Path)
//
//	for _, g := range safepath.Collisions(paths) {
//		// g[1:] would overwrite g[0] on a case-insensitive disk
//	}
package safepath
