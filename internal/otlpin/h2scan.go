package otlpin

// h2Scan follows the HTTP/2 frames a client sends on a gRPC connection
// and counts the payload of its DATA frames, their padding left out: the
// bytes that carry messages. The preface, frame headers and every other
// frame — HEADERS, SETTINGS, PING, WINDOW_UPDATE, frames of types HTTP/2
// has no use for, which gRPC reads and drops — carry none, so a client
// sending them does not pass for a message arriving (the rate watch) nor
// grow its connection's pool. A connection that does not open with the
// HTTP/2 client preface (TLS records, when the listener is below the
// handshake: GRPCCredentials lifts the scan above it) is counted whole,
// every byte, as before frames were followed.
//
// DATA of a stream gRPC already ended still counts: which stream a frame
// is for is not tied here to the streams the tap admitted.
//
// It also counts the streams the client opens (HEADERS) and resets
// (RST_STREAM): a connection that resets more than maxResets streams, and
// more than half of those it opened, is a "rapid reset" flood (each
// stream costs the server its set-up and a goroutine, and the client
// nothing), and flooded reports it so the connection is closed.
type h2Scan struct {
	state  uint8
	off    int     // bytes of the preface or of the frame header seen
	hdr    [9]byte // the frame header being read
	left   uint32  // payload bytes of the frame still to come
	data   bool    // the frame is DATA
	padLen bool    // ... padded, and its pad length is the next byte
	pad    uint32  // the padding at the end of the DATA frame
	opened uint32  // HEADERS frames
	resets uint32  // RST_STREAM frames
}

// maxResets is how many streams a connection may reset before the share
// of its streams it resets is looked at: an exporter cancels an export
// now and then (a timeout), never most of them.
const maxResets = 100

// flooded reports whether the client resets streams as a flood does.
func (s *h2Scan) flooded() bool {
	return s.resets > maxResets && s.resets > s.opened/2
}

const (
	scanPreface = iota
	scanHeader
	scanPayload
	scanAll // not HTTP/2 as seen from here: every byte counts
)

const (
	h2Preface      = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameData    = 0x0
	h2FrameHeaders = 0x1
	h2FrameReset   = 0x3
	h2FlagPadded   = 0x8
)

// feed follows p, the next bytes the client sent, and returns how many of
// them are DATA payload.
func (s *h2Scan) feed(p []byte) (data int64) {
	for len(p) > 0 {
		switch s.state {
		case scanAll:
			return data + int64(len(p))
		case scanPreface:
			n := min(len(p), len(h2Preface)-s.off)
			if string(p[:n]) != h2Preface[s.off:s.off+n] {
				s.state = scanAll
				data += int64(s.off) // what looked like the preface
				continue
			}
			s.off += n
			p = p[n:]
			if s.off == len(h2Preface) {
				s.state, s.off = scanHeader, 0
			}
		case scanHeader:
			n := copy(s.hdr[s.off:], p)
			s.off += n
			p = p[n:]
			if s.off < len(s.hdr) {
				return data
			}
			s.off = 0
			s.left = uint32(s.hdr[0])<<16 | uint32(s.hdr[1])<<8 | uint32(s.hdr[2])
			s.data = s.hdr[3] == h2FrameData
			switch s.hdr[3] {
			case h2FrameHeaders:
				s.opened++
			case h2FrameReset:
				s.resets++
			}
			s.padLen = s.data && s.hdr[4]&h2FlagPadded != 0 && s.left > 0
			s.pad = 0
			s.state = scanPayload
		case scanPayload:
			if s.left == 0 {
				s.state = scanHeader
				continue
			}
			if s.padLen {
				s.padLen = false
				s.pad = uint32(p[0])
				s.left--
				p = p[1:]
				continue
			}
			n := uint32(min(uint64(len(p)), uint64(s.left)))
			if s.data && s.left > s.pad {
				data += int64(min(n, s.left-s.pad))
			}
			s.left -= n
			p = p[n:]
		}
	}
	if s.state == scanPayload && s.left == 0 {
		s.state = scanHeader
	}
	return data
}
