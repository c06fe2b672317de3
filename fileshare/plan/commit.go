package plan

import "path"

// CommitRule says which directories of a share are published as one
// version (a checkpoint committed by its marker file).
type CommitRule struct{ Marker, Dirs string } // Marker "" = off. Dirs: a path.Match pattern of directories; "" means "*"

// CommitDir is the commit directory file path p belongs to: its longest
// ancestor directory that matches Dirs, or "" if none does or the rule is
// off. A malformed pattern matches nothing.
func (r CommitRule) CommitDir(p string) string {
	if r.Marker == "" {
		return ""
	}
	pat := r.Dirs
	if pat == "" {
		pat = "*"
	}
	for d := path.Dir(p); d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if ok, err := path.Match(pat, d); err == nil && ok {
			return d
		}
	}
	return ""
}

// markerPath is the marker file of commit directory dir.
func (r CommitRule) markerPath(dir string) string { return dir + "/" + r.Marker }

// isMarker reports whether p is the marker of its commit directory.
func (r CommitRule) isMarker(p string) bool {
	d := r.CommitDir(p)
	return d != "" && p == r.markerPath(d)
}
