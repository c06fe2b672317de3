//go:build linux || darwin || freebsd

package stabilizer

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfs reads the space available to unprivileged users under dir
// (Bavail, which leaves out the blocks a filesystem keeps for root) and the
// filesystem's size.
func statfs(dir string) (free, size int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := int64(st.Bsize)
	return int64(st.Bavail) * bs, int64(st.Blocks) * bs, nil
}
