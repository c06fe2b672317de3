//go:build !(linux || darwin || freebsd)

package stabilizer

import (
	"errors"
	"fmt"
)

// statfs is not implemented here: the disk guard logs that once and never
// finds the site full.
func statfs(dir string) (free, size int64, err error) {
	return 0, 0, fmt.Errorf("statfs %s: %w", dir, errors.ErrUnsupported)
}
