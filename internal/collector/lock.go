package collector

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrDataDirLocked: another collector uses the data folder.
var ErrDataDirLocked = errors.New("collector: data dir in use by another collector")

// lockDataDir takes an exclusive lock on dir, held until the file is
// closed (or the process dies, so a killed collector leaves no stale lock):
// two collectors appending to one write-ahead log would corrupt it.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("collector: data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrDataDirLocked, dir, err)
	}
	return f, nil
}
