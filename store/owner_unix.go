//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// keepOwner gives fh, the new version of path about to replace it, the
// owner, group and permission bits of the file it replaces, so that a
// command run as root on a service's data dir (collector erase) leaves
// files the service's user can still open. A path that does not exist
// yet keeps fh's mode (0600) and, written by root, takes the owner and
// group of the folder it is made in (the data dir's: erase's first
// erased.json would otherwise be root's, and the service could not start
// on it). Only root gives a file away, so another user writes the file as
// its own, as before.
func keepOwner(fh *os.File, path string) error {
	old, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		dir, err := os.Stat(filepath.Dir(path))
		if err != nil {
			return err
		}
		return ownAs(fh, path, dir)
	}
	if err != nil {
		return err
	}
	if err := ownAs(fh, path, old); err != nil {
		return err
	}
	return fh.Chmod(old.Mode().Perm())
}

// ownAs gives fh the owner and group of like, when run as root.
func ownAs(fh *os.File, path string, like fs.FileInfo) error {
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	cur, err := fh.Stat()
	if err != nil {
		return err
	}
	if c, ok := cur.Sys().(*syscall.Stat_t); ok && (c.Uid != st.Uid || c.Gid != st.Gid) {
		if err := fh.Chown(int(st.Uid), int(st.Gid)); err != nil {
			return fmt.Errorf("give %s the owner of %s (uid %d, gid %d): %w", path, like.Name(), st.Uid, st.Gid, err)
		}
	}
	return nil
}
