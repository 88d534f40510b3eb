package histogram

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestHistogramBinaryRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	full, _ := randomHistogram(r, 10000)
	full.Observe(0)          // underflow bucket
	full.Observe(1e6)        // overflow bucket
	full.AddBucket(7, 1<<62) // a large count
	for name, h := range map[string]*Histogram{"empty": {}, "one": func() *Histogram {
		var h Histogram
		h.Observe(0.003)
		return &h
	}(), "full": full} {
		b, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Histogram
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameBuckets(t, &got, h)
		if got.Sum() != h.Sum() {
			t.Fatalf("%s: sum %v != %v", name, got.Sum(), h.Sum())
		}
		t.Logf("%s: %d observations in %d non-empty buckets, %d bytes", name, h.Count(), h.nonEmptyCount(), len(b))
	}
}

func TestHistogramBinaryIsCompact(t *testing.T) {
	// A minute of lognormal latency from a busy service.
	r := rand.New(rand.NewPCG(13, 14))
	h, _ := randomHistogram(r, 60000)
	b, _ := h.MarshalBinary()
	if len(b) > 8*h.nonEmptyCount()+16 {
		t.Fatalf("%d bytes for %d non-empty buckets", len(b), h.nonEmptyCount())
	}
	if len(b) > 1500 {
		t.Fatalf("%d bytes, want a sparse encoding well under the 9 KiB of a dense one", len(b))
	}
}

func encode(sum float64, pairs ...uint64) []byte {
	b := []byte{encodingV1}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(sum))
	b = binary.AppendUvarint(b, uint64(len(pairs)/2))
	for _, p := range pairs {
		b = binary.AppendUvarint(b, p)
	}
	return b
}

func TestHistogramUnmarshalBadInput(t *testing.T) {
	good := encode(1.5, 10, 3, 5, 1)
	withN := func(n uint64, rest ...byte) []byte {
		b := []byte{encodingV1}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(1))
		b = binary.AppendUvarint(b, n)
		return append(b, rest...)
	}
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"version 0", []byte{0}, ErrVersion},
		{"version 2", append([]byte{2}, good[1:]...), ErrVersion},
		{"truncated sum", good[:5], ErrCorrupt},
		{"no bucket count", good[:9], ErrCorrupt},
		{"negative sum", encode(-1, 10, 3), ErrCorrupt},
		{"NaN sum", encode(math.NaN(), 10, 3), ErrCorrupt},
		{"infinite sum", encode(math.Inf(1), 10, 3), ErrCorrupt},
		{"sum of nothing", encode(2), ErrCorrupt},
		{"too many buckets", withN(NumBuckets + 1), ErrCorrupt},
		{"huge bucket count", withN(1 << 62), ErrCorrupt},
		{"truncated pair", good[:len(good)-1], ErrCorrupt},
		{"truncated gap", withN(1), ErrCorrupt},
		{"first index out of range", encode(1, NumBuckets, 1), ErrCorrupt},
		{"later index out of range", encode(1, 10, 1, NumBuckets-10, 1), ErrCorrupt},
		{"huge gap", encode(1, 10, 1, 1<<63, 1), ErrCorrupt},
		{"repeated index", encode(1, 10, 1, 0, 1), ErrCorrupt},
		{"zero count", encode(1, 10, 0), ErrCorrupt},
		{"count overflow", encode(1, 10, 1<<63, 1, 1<<63), ErrCorrupt},
		{"trailing bytes", append(encode(1, 10, 3), 0), ErrCorrupt},
		{"overlong varint", append(withN(1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrCorrupt},
	}
	var h Histogram
	h.Observe(0.042)
	h.Observe(0.043)
	before := *h.Clone()
	for _, c := range cases {
		err := h.UnmarshalBinary(c.data)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if err != nil && err.Error()[:11] != "histogram: " {
			t.Errorf("%s: error %q lacks the package prefix", c.name, err)
		}
		sameBuckets(t, &h, &before) // a failed decode leaves h as it was
	}
	if err := h.UnmarshalBinary(good); err != nil {
		t.Fatalf("good input: %v", err)
	}
	if h.Count() != 4 || h.counts[10] != 3 || h.counts[15] != 1 || h.Sum() != 1.5 {
		t.Fatalf("good input decoded to count %d", h.Count())
	}
}

func FuzzHistogramUnmarshalBinary(f *testing.F) {
	r := rand.New(rand.NewPCG(15, 16))
	h, _ := randomHistogram(r, 300)
	seed, _ := h.MarshalBinary()
	f.Add(seed)
	f.Add(encode(1.5, 10, 3, 5, 1))
	f.Add(encode(0))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Histogram
		if err := h.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("unexpected error %v", err)
			}
			if h.Count() != 0 {
				t.Fatal("failed decode changed the histogram")
			}
			return
		}
		// What decodes is a consistent histogram that encodes to the same.
		var n uint64
		h.Buckets(func(_ int, c uint64) { n += c })
		if n != h.Count() {
			t.Fatalf("bucket counts sum to %d, Count %d", n, h.Count())
		}
		b, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var h2 Histogram
		if err := h2.UnmarshalBinary(b); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		sameBuckets(t, &h2, &h)
		_ = h.Quantile(0.95)
	})
}

func BenchmarkHistogramMarshalBinary(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 18))
	h, _ := randomHistogram(r, 10000)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = h.AppendBinary(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes/histogram")
}

func BenchmarkHistogramUnmarshalBinary(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 18))
	h, _ := randomHistogram(r, 10000)
	data, _ := h.MarshalBinary()
	var g Histogram
	b.ReportAllocs()
	for b.Loop() {
		if err := g.UnmarshalBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}
