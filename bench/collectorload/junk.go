package main

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// junkConn holds streams export streams open on one raw HTTP/2 connection
// to target — their headers and nothing else, each opened again when the
// collector ends it — and sends kibPerSec KiB/s of frames of a type HTTP/2
// ignores beside them, until ctx ends: bytes on the connection that are
// no stream's message. It adds the streams it opens to opened.
func junkConn(ctx context.Context, target, token string, streams, kibPerSec int, opened *atomic.Int64) {
	conn, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	fields := [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/opentelemetry.proto.collector.trace.v1.TraceService/Export"},
		{":authority", target}, {"content-type", "application/grpc"}, {"te", "trailers"}}
	if token != "" {
		fields = append(fields, [2]string{"authorization", "Bearer " + token})
	}
	writes := make(chan func(*http2.Framer) error, 2*streams)
	next := uint32(1)
	held := make(map[uint32]bool) // the streams open (the reader's)
	open := func() {
		id := next
		next += 2
		held[id] = true
		writes <- func(fr *http2.Framer) error {
			hdr.Reset()
			for _, f := range fields {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr.Bytes(), EndHeaders: true})
		}
		opened.Add(1)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return
	}
	writes <- func(fr *http2.Framer) error { return fr.WriteSettings() }
	for range streams {
		open()
	}
	go junkWriter(ctx, conn, writes, kibPerSec)
	fr := http2.NewFramer(nil, conn)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		// A stream ends once, though the collector may send its trailers
		// and then RST_STREAM.
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if held[f.StreamID] {
				delete(held, f.StreamID)
				open()
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() && held[f.StreamID] {
				delete(held, f.StreamID)
				open()
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				writes <- func(fr *http2.Framer) error { return fr.WriteSettingsAck() }
			}
		}
	}
}

// junkWriter writes what junkConn queues and, between, kibPerSec/100 (at
// least one) 1 KiB frames of an unknown type every 10 ms.
func junkWriter(ctx context.Context, conn net.Conn, writes <-chan func(*http2.Framer) error, kibPerSec int) {
	fr := http2.NewFramer(conn, nil)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	junk := bytes.Repeat([]byte{'j'}, 1<<10)
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case w := <-writes:
			err = w(fr)
		case <-tick.C:
			for range max(1, kibPerSec/100) {
				if err = fr.WriteRawFrame(0xfe, 0, 0, junk); err != nil {
					break
				}
			}
		}
		if err != nil {
			return
		}
	}
}
