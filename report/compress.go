package report

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The compression of a body, byte 6 of the header.
const (
	codecNone byte = 0
	codecZstd byte = 1
)

var magic = [4]byte{'q', 't', 'r', 'p'}

const headerLen = 8

// The encoder is safe for concurrent EncodeAll and serves the whole
// process. Decoding uses a bounded set of decoders (decoders), so that one
// slow body never holds up the others.
var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic("report: zstd encoder: " + err.Error()) // only on bad options
		}
		return e
	})
	zdecs = sync.OnceValue(func() chan *zstd.Decoder {
		return make(chan *zstd.Decoder, maxDecoders)
	})
)

// maxDecoders bounds the zstd decoders kept for reuse; more decode at
// once, each with a decoder of its own made for the call.
const maxDecoders = 16

func newDecoder() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxDecodedBytes),
		zstd.WithDecoderMaxWindow(MaxDecodedBytes),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic("report: zstd decoder: " + err.Error()) // only on bad options
	}
	return d
}

// Decompression buffers are kept for reuse: a decoded report holds no
// reference to its raw bytes (strings and sketches are copied out), so
// UnmarshalBinary hands the buffer back once the report is read. At most
// maxRawKept are kept, each of at most maxRawKeptBytes.
const (
	maxRawKept      = 64
	maxRawKeptBytes = 1 << 20
)

var rawBufs = make(chan []byte, maxRawKept)

// rawBuf returns an empty buffer of capacity n or more.
func rawBuf(n uint64) []byte {
	select {
	case b := <-rawBufs:
		if uint64(cap(b)) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, n)
}

func putRawBuf(b []byte) {
	if cap(b) > maxRawKeptBytes {
		return
	}
	select {
	case rawBufs <- b:
	default:
	}
}

// decompress decodes a zstd body into a buffer of capacity limit, which
// the decoder never grows (a bomb stops at the limit).
func decompress(body []byte, limit uint64) ([]byte, error) {
	var d *zstd.Decoder
	select {
	case d = <-zdecs():
	default:
		d = newDecoder()
	}
	raw, err := d.DecodeAll(body, rawBuf(limit))
	select {
	case zdecs() <- d:
	default:
		d.Close()
	}
	return raw, err
}
