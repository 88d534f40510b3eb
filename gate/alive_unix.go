//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package gate

import (
	"syscall"
)

// open reports whether the upstream has neither closed the idle
// connection nor sent anything on it, without blocking: one recv with
// MSG_PEEK|MSG_DONTWAIT.
func (pc *h1Conn) open() bool {
	sc, ok := pc.Conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
