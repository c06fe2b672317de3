package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is a binary's build.
type Info struct {
	// Version is the main module's version: a release tag, or "(devel)"
	// for a build from a checkout.
	Version string
	// Revision is the VCS commit, with "+dirty" when the work tree had
	// changes; "unknown" when Go recorded none (go run, go test).
	Revision string
	// GoVersion is the toolchain that built it.
	GoVersion string
}

// Read returns the running binary's build.
func Read() Info {
	out := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	if v := bi.Main.Version; v != "" {
		out.Version = v
	}
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && out.Revision != "unknown" {
		out.Revision += "+dirty"
	}
	return out
}

// String is the --version text: version, revision and toolchain.
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
