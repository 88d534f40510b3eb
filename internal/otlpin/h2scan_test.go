package otlpin

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/http2"
)

// clientFrames is what a client might send on a gRPC connection: the
// preface, then frames of every kind, 150 bytes of them DATA payload.
func clientFrames(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	f := http2.NewFramer(&b, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	must(f.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: bytes.Repeat([]byte{0x82}, 40), EndHeaders: true}))
	must(f.WriteData(1, false, bytes.Repeat([]byte{'a'}, 100)))
	must(f.WriteDataPadded(1, false, bytes.Repeat([]byte{'b'}, 50), make([]byte, 20)))
	must(f.WritePing(false, [8]byte{1}))
	must(f.WriteRawFrame(0xff, 0, 1, bytes.Repeat([]byte{'j'}, 300))) // a type HTTP/2 ignores
	must(f.WriteWindowUpdate(0, 1<<16))
	must(f.WriteData(3, false, nil))
	must(f.WriteDataPadded(3, false, nil, make([]byte, 7))) // padding only
	must(f.WriteRSTStream(3, http2.ErrCodeCancel))
	return b.Bytes()
}

func TestH2ScanCountsDataOnly(t *testing.T) {
	wire := clientFrames(t)
	feed := func(chunks func(rest []byte) int) int64 {
		var s h2Scan
		var got int64
		for p := wire; len(p) > 0; {
			n := min(len(p), chunks(p))
			got += s.feed(p[:n])
			p = p[n:]
		}
		return got
	}
	if got := feed(func(p []byte) int { return len(p) }); got != 150 {
		t.Errorf("whole: %d DATA bytes, want 150", got)
	}
	if got := feed(func([]byte) int { return 1 }); got != 150 {
		t.Errorf("a byte at a time: %d DATA bytes, want 150", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		if got := feed(func([]byte) int { return 1 + rng.IntN(40) }); got != 150 {
			t.Fatalf("in random pieces: %d DATA bytes, want 150", got)
		}
	}
}

// A connection that does not open with the HTTP/2 preface (TLS records
// below the handshake, HTTP/1 sent to the port) is counted whole.
func TestH2ScanNotHTTP2CountsAll(t *testing.T) {
	for _, in := range []string{
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", // a TLS ClientHello's start
		"PRI * HTTP/1.1\r\nHost: x\r\n\r\n",            // the preface's first 9 bytes, then not
		"GET / HTTP/1.1\r\n\r\n",
	} {
		var s h2Scan
		got := s.feed([]byte(in[:9])) + s.feed([]byte(in[9:]))
		if got != int64(len(in)) {
			t.Errorf("%q: %d bytes counted, want all %d", in, got, len(in))
		}
	}
}

// TestH2ScanFlood: resets count as a flood only past maxResets and past
// half the streams opened.
func TestH2ScanFlood(t *testing.T) {
	frame := func(typ byte) []byte { return []byte{0, 0, 0, typ, 0, 0, 0, 0, 1} }
	feed := func(s *h2Scan, opened, resets int) {
		for range opened {
			s.feed(frame(h2FrameHeaders))
		}
		for range resets {
			s.feed(frame(h2FrameReset))
		}
	}
	for _, c := range []struct {
		opened, resets int
		flooded        bool
	}{{101, 101, true}, {100, 100, false}, {1000, 101, false}, {1000, 501, true}, {0, 101, true}} {
		s := &h2Scan{}
		s.feed([]byte(h2Preface))
		feed(s, c.opened, c.resets)
		if s.flooded() != c.flooded || int(s.opened) != c.opened || int(s.resets) != c.resets {
			t.Errorf("%d opened, %d reset: flooded %v (counted %d, %d), want %v", c.opened, c.resets, s.flooded(), s.opened, s.resets, c.flooded)
		}
	}
}
