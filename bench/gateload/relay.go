package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/panjf2000/gnet/v2"
)

// relay is a floor, not a proxy: a TCP relay with no HTTP in it. Each
// client connection gets an upstream connection of its own and the bytes
// are passed both ways as they come. No HTTP proxy written the same way can
// take less CPU a request than its relay, so the relays say what the Go
// runtime's I/O costs on this machine before any proxying is done:
//
//   - go: a goroutine each way per connection, reading into a 32 KiB buffer
//     and writing what it read (the netpoller and the scheduler, as the gate
//     and net/http use them);
//   - gnet: github.com/panjf2000/gnet/v2 event loops, one per core, the
//     client and its upstream connection on the same loop, each read
//     written to the other side from the loop (no goroutine per
//     connection, no park and wake-up per read: nginx's model).
func relay(args []string) int {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	mode := fs.String("mode", "go", "go or gnet")
	listen := fs.String("listen", "127.0.0.1:0", "address")
	upstream := fs.String("upstream", "", "upstream host:port")
	fs.Parse(args)
	var err error
	switch *mode {
	case "go":
		err = relayGo(*listen, *upstream)
	case "gnet":
		err = relayGnet(*listen, *upstream)
	default:
		err = fmt.Errorf("-mode %q: go or gnet", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	return 0
}

func relayGo(listen, upstream string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				return
			}
			defer up.Close()
			go pipe(up, c)
			pipe(c, up)
		}()
	}
}

// pipe copies src to dst with a plain read and write loop (io.Copy would
// splice between the two sockets, which is not what a proxy that reads
// HTTP can do).
func pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close() // the other side's read ends, and its pipe with it
}

// pair is a client connection and its upstream connection, both on one
// event loop.
type pair struct {
	client, up gnet.Conn
}

type gnetRelay struct {
	gnet.BuiltinEventEngine
	upstream net.Addr
}

func relayGnet(listen, upstream string) error {
	addr, err := net.ResolveTCPAddr("tcp", upstream)
	if err != nil {
		return err
	}
	return gnet.Run(&gnetRelay{upstream: addr}, "tcp://"+listen, gnet.WithMulticore(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay))
}

func (r *gnetRelay) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if p, ok := c.Context().(*pair); ok { // the upstream side, registered below
		p.up = c
		p.client.Wake(nil) // pass on what the client sent meanwhile
		return nil, gnet.None
	}
	p := &pair{client: c}
	c.SetContext(p)
	if _, err := c.EventLoop().Register(gnet.NewContext(context.Background(), p), r.upstream); err != nil {
		return nil, gnet.Close
	}
	return nil, gnet.None
}

func (r *gnetRelay) OnTraffic(c gnet.Conn) gnet.Action {
	p, _ := c.Context().(*pair)
	if p == nil {
		return gnet.Close
	}
	other := p.up
	if c == p.up {
		other = p.client
	}
	if other == nil {
		return gnet.None // the upstream is not open yet: keep the bytes
	}
	b, _ := c.Next(-1)
	if _, err := other.Write(b); err != nil {
		return gnet.Close
	}
	return gnet.None
}

func (r *gnetRelay) OnClose(c gnet.Conn, _ error) gnet.Action {
	if p, ok := c.Context().(*pair); ok {
		other := p.up
		if c == p.up {
			other = p.client
		}
		if other != nil {
			other.Close()
		}
	}
	return gnet.None
}
