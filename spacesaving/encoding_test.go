package spacesaving

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

func TestEncodingRoundTrip(t *testing.T) {
	for _, k := range []int{1, 7, 200} {
		s := New(k)
		e := feed(s, zipfStream(31, 20000, 4000, 1.1, true))
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var d Sketch
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		check(t, &d, e)
		if !slices.Equal(d.Top(-1), s.Top(-1)) || !slices.Equal(d.alpha, s.alpha) || d.Capacity() != k {
			t.Fatal("decoded sketch differs")
		}
		b2, err := d.AppendBinary([]byte("prefix"))
		if err != nil || string(b2[:6]) != "prefix" {
			t.Fatal("AppendBinary does not append")
		}
		b2 = b2[6:]
		d2 := New(3)
		if err := d2.UnmarshalBinary(b2); err != nil || !slices.Equal(d2.Top(-1), s.Top(-1)) {
			t.Fatalf("second round trip: %v", err)
		}
		// The decoded sketch keeps working.
		d.Add("new", 1)
		e["new"]++
		check(t, &d, e)
	}
	var z Sketch
	b, err := z.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if z.heap != nil {
		t.Fatal("MarshalBinary changed a zero Sketch")
	}
	d := New(1)
	if err := d.UnmarshalBinary(b); err != nil || d.Capacity() != DefaultCapacity || d.Len() != 0 {
		t.Fatalf("zero Sketch round trip: %v, capacity %d", err, d.Capacity())
	}
}

// A sketch from another process (another seed) decodes with its buckets
// flattened to their maximum and still merges within the guarantees.
func TestEncodingForeignSeed(t *testing.T) {
	s := New(20)
	e := feed(s, zipfStream(32, 10000, 3000, 1.1, false))
	b, _ := s.MarshalBinary()
	_, n := binary.Uvarint(b[1:])
	at := 1 + n + 1 // version, capacity, bucket bits
	b[at] ^= 0xff
	var d Sketch
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	m := s.maxAlpha()
	for _, a := range d.alpha {
		if a != m {
			t.Fatalf("bucket %d, want the maximum %d", a, m)
		}
	}
	check(t, &d, e)
	other := New(20)
	e2 := feed(other, zipfStream(33, 10000, 3000, 1.1, false))
	other.Merge(&d)
	for k, v := range e {
		e2[k] += v
	}
	check(t, other, e2)
}

func TestUnmarshalErrors(t *testing.T) {
	s := New(4)
	feed(s, []event{{"a", 5}, {"b", 3}, {"c", 1}})
	good, _ := s.MarshalBinary()

	enc := func(f func(b []byte) []byte) []byte { return f(nil) }
	hdr := func(b []byte, capacity, abits, total, n uint64) []byte {
		b = append(b, encodingVersion)
		b = binary.AppendUvarint(b, capacity)
		b = binary.AppendUvarint(b, abits)
		b = binary.LittleEndian.AppendUint64(b, seedID)
		b = binary.AppendUvarint(b, total)
		return binary.AppendUvarint(b, n)
	}
	ctr := func(b []byte, key string, count, errb uint64) []byte {
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
		b = binary.AppendUvarint(b, count)
		return binary.AppendUvarint(b, errb)
	}
	buckets := func(b []byte, n int) []byte { return append(b, make([]byte, n)...) }

	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"version", append([]byte{9}, good[1:]...), ErrVersion},
		{"trailing", append(slices.Clone(good), 0), ErrCorrupt},
		{"capacity 0", enc(func(b []byte) []byte { return buckets(hdr(b, 0, 2, 0, 0), 4) }), ErrCorrupt},
		{"capacity huge", enc(func(b []byte) []byte { return hdr(b, 1<<40, 42, 0, 0) }), ErrCorrupt},
		{"bucket bits", enc(func(b []byte) []byte { return buckets(hdr(b, 4, 3, 0, 0), 8) }), ErrCorrupt},
		{"more counters than capacity", enc(func(b []byte) []byte { return hdr(b, 1, 2, 9, 2) }), ErrCorrupt},
		{"counters beyond input", enc(func(b []byte) []byte { return hdr(b, 1000, 12, 9, 1000) }), ErrTruncated},
		{"err above count", enc(func(b []byte) []byte { return buckets(ctr(hdr(b, 1, 2, 9, 1), "a", 2, 3), 4) }), ErrCorrupt},
		{"count above total", enc(func(b []byte) []byte { return buckets(ctr(hdr(b, 1, 2, 9, 1), "a", 10, 0), 4) }), ErrCorrupt},
		{"guaranteed above total", enc(func(b []byte) []byte {
			return buckets(ctr(ctr(hdr(b, 2, 3, 9, 2), "a", 6, 0), "b", 6, 0), 8)
		}), ErrCorrupt},
		{"duplicate key", enc(func(b []byte) []byte {
			return buckets(ctr(ctr(hdr(b, 2, 3, 9, 2), "a", 2, 0), "a", 2, 0), 8)
		}), ErrCorrupt},
		{"key beyond input", enc(func(b []byte) []byte {
			b = hdr(b, 1, 2, 9, 1)
			b = binary.AppendUvarint(b, 100)
			return append(b, "abcd"...)
		}), ErrTruncated},
		{"bucket above total", enc(func(b []byte) []byte {
			b = ctr(hdr(b, 1, 2, 9, 1), "a", 2, 0)
			return append(b, 0, 0, 0, 10)
		}), ErrCorrupt},
		{"bucket above a count", enc(func(b []byte) []byte {
			b = ctr(hdr(b, 1, 2, 9, 1), "a", 2, 0)
			return append(b, 0, 0, 0, 3)
		}), ErrCorrupt},
		{"varint overflow", enc(func(b []byte) []byte {
			return append(hdr(b, 1, 2, 9, 1)[:2+1+8], bytes.Repeat([]byte{0xff}, 11)...)
		}), ErrCorrupt},
	}
	for i := 1; i < len(good); i++ {
		cases = append(cases, struct {
			name string
			in   []byte
			want error
		}{"prefix", good[:i], ErrTruncated})
	}
	for _, tc := range cases {
		d := New(4)
		d.Add("keep", 7)
		err := d.UnmarshalBinary(tc.in)
		if !errors.Is(err, tc.want) {
			// A cut may fall where the bytes read as a smaller, valid
			// field; a truncated input must still be rejected.
			if tc.name != "prefix" || err == nil {
				t.Errorf("%s (%d bytes): err = %v, want %v", tc.name, len(tc.in), err, tc.want)
			}
		}
		if c, _, ok := d.Estimate("keep"); !ok || c != 7 || d.Total() != 7 {
			t.Errorf("%s: failed decode changed the sketch", tc.name)
		}
	}
}

func FuzzUnmarshalBinary(f *testing.F) {
	s := New(3)
	feed(s, []event{{"a", 5}, {"b", 3}, {"c", 1}, {"d", 1}, {"e", 9}})
	b, _ := s.MarshalBinary()
	f.Add(b)
	f.Add([]byte{1, 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Sketch
		if err := d.UnmarshalBinary(data); err != nil {
			return
		}
		checkInternal(t, &d)
		out, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var d2 Sketch
		if err := d2.UnmarshalBinary(out); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if !slices.Equal(d.Top(-1), d2.Top(-1)) || d.Total() != d2.Total() {
			t.Fatal("round trip differs")
		}
		d.Add("x", 1)
		d.Merge(&d2)
		checkInternal(t, &d)
	})
}

// FuzzSketch drives a small sketch with a fuzzed stream and checks the
// guarantees against exact counts.
func FuzzSketch(f *testing.F) {
	f.Add([]byte("aaaabbbcdefaaaghijkaaa"), uint8(3))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 255}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		capacity := int(k%16) + 1
		s, m := New(capacity), New(capacity)
		e := exact{}
		for i, c := range data {
			key := string(rune('a' + c%32))
			w := uint64(c>>5) + 1
			if i%2 == 0 {
				s.Add(key, w)
			} else {
				m.Add(key, w)
			}
			e[key] += w
		}
		s.Merge(m)
		check(t, s, e)
	})
}
