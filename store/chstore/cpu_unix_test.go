//go:build unix

package chstore

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system: the
// client's share of a write, which other load on the machine inflates far
// less than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
