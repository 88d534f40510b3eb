//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package gate

import (
	"syscall"
	"unsafe"
)

// open reports whether the upstream has neither closed the idle
// connection nor sent anything on it, without blocking: one recv with
// MSG_PEEK|MSG_DONTWAIT. It runs before every reuse, so it allocates
// nothing: the raw connection and the callback are made once per
// connection (rawPeek).
func (pc *h1Conn) open() bool {
	if pc.peek.raw == nil {
		sc, ok := pc.Conn.(syscall.Conn)
		if !ok {
			return true
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		pc.peek.raw, pc.peek.fn = raw, pc.peek.recv
	}
	pc.peek.alive = false
	err := pc.peek.raw.Read(pc.peek.fn)
	return err == nil && pc.peek.alive
}

// rawPeek is what open keeps per connection.
type rawPeek struct {
	raw   syscall.RawConn
	fn    func(fd uintptr) bool // recv, as a value made once
	alive bool
	b     [1]byte
}

func (p *rawPeek) recv(fd uintptr) bool {
	_, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	p.alive = errno == syscall.EAGAIN || errno == syscall.EWOULDBLOCK
	return true
}
