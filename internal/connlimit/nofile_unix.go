//go:build unix

package connlimit

import "syscall"

// openFileLimit is the process's limit of open files (Go raises the soft
// limit to the hard one at start).
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 2 * DefaultCeiling
	}
	return int(r.Cur)
}
