package buildinfo

import (
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	i := Read()
	if i.Version == "" || i.Revision == "" || !strings.HasPrefix(i.GoVersion, "go") {
		t.Fatalf("build info with an empty part: %+v", i)
	}
	if s := i.String(); !strings.Contains(s, i.Revision) || !strings.Contains(s, i.GoVersion) {
		t.Fatalf("String() = %q lacks the revision or the toolchain", s)
	}
}
