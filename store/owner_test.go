package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileAtomicKeepsOwner: a file rewritten in place keeps its
// permission bits and, when root rewrites it (collector erase run by an
// operator on a service's data dir), its owner and group, so the service
// can still open it.
func TestWriteFileAtomicKeepsOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "1796292660.wal")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil { // whatever the umask
		t.Fatal(err)
	}
	const uid, gid = 65532, 65533
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(path, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFileAtomic(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o640 {
		t.Errorf("mode after rewrite %v, want -rw-r----- (the old file's)", got)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("content %q, want new", b)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !root || !ok {
		return // only root can give a file away
	}
	if st.Uid != uid || st.Gid != gid {
		t.Errorf("owner after rewrite by root %d:%d, want the old file's %d:%d", st.Uid, st.Gid, uid, gid)
	}
}

// TestWriteFileAtomicNewFile: a file that did not exist is 0600, and
// written by root it is owned as its folder is (the service's data dir:
// the first erased.json of a collector erase run as root).
func TestWriteFileAtomicNewFile(t *testing.T) {
	dir := t.TempDir()
	const uid, gid = 65532, 65533
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "erased.json")
	if err := WriteFileAtomic(path, []byte("x")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode %v, want -rw-------", got)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !root || !ok {
		return
	}
	if st.Uid != uid || st.Gid != gid {
		t.Errorf("a new file written by root: owner %d:%d, want its folder's %d:%d", st.Uid, st.Gid, uid, gid)
	}
}
