//go:build !linux

package storage

import "github.com/cockroachdb/pebble/v2/vfs"

func defaultFS() vfs.FS { return vfs.Default }
