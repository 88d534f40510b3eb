//go:build !unix

package store

import (
	"errors"
	"io/fs"
	"os"
)

// keepOwner gives fh, the new version of path, the permission bits of
// the file it replaces (owners are a Unix matter).
func keepOwner(fh *os.File, path string) error {
	old, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fh.Chmod(old.Mode().Perm())
}
