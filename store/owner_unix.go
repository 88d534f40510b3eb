//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives fh, the new version of path about to replace it, the
// owner, group and permission bits of the file it replaces, so that a
// command run as root on a service's data dir (collector erase) leaves
// files the service's user can still open. A path that does not exist
// yet keeps fh as it is; only root gives a file away, so another user
// writes the file as its own, as before.
func keepOwner(fh *os.File, path string) error {
	old, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st, ok := old.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		cur, err := fh.Stat()
		if err != nil {
			return err
		}
		if c, ok := cur.Sys().(*syscall.Stat_t); ok && (c.Uid != st.Uid || c.Gid != st.Gid) {
			if err := fh.Chown(int(st.Uid), int(st.Gid)); err != nil {
				return fmt.Errorf("give the new %s the owner of the old (uid %d, gid %d): %w", path, st.Uid, st.Gid, err)
			}
		}
	}
	return fh.Chmod(old.Mode().Perm())
}
