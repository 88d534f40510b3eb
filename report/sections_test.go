package report

import (
	"encoding/binary"
	"errors"
	"testing"
)

// withSections replaces the sections of an uncompressed version 2 body
// (its last byte, 0) with tail, fixing the body length.
func withSections(t *testing.T, tail []byte) []byte {
	t.Helper()
	b, err := docReport().marshalUncompressed()
	if err != nil {
		t.Fatal(err)
	}
	n, k := binary.Uvarint(b[headerLen:])
	raw := append([]byte(nil), b[headerLen+k:]...)
	if uint64(len(raw)) != n || raw[len(raw)-1] != 0 {
		t.Fatalf("unexpected body: length %d of %d, last byte %d", len(raw), n, raw[len(raw)-1])
	}
	raw = append(raw[:len(raw)-1], tail...)
	out := append([]byte(nil), b[:headerLen]...)
	out = binary.AppendUvarint(out, uint64(len(raw)))
	return append(out, raw...)
}

func TestSectionsUnknownSkipped(t *testing.T) {
	// Two sections of tags no build knows: a newer process's. They are
	// skipped and the rest of the report decodes.
	tail := []byte{2, 200, 1, 3, 'a', 'b', 'c', 201, 1, 0}
	got, err := Decode(withSections(t, tail))
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, docReport(), got)
}

func TestSectionsMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail []byte
		want error
	}{
		{"tags not increasing", []byte{2, 9, 0, 9, 0}, ErrMalformed},
		{"tags decreasing", []byte{2, 9, 0, 8, 0}, ErrMalformed},
		{"payload longer than the body", []byte{1, 9, 5, 1}, ErrMalformed},
		{"count above the limit", []byte{65}, ErrTooLarge},
		{"count above the bytes left", []byte{3, 9, 0}, ErrMalformed},
		{"trailing bytes", []byte{1, 9, 0, 7}, ErrMalformed},
		{"missing", nil, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Report
			err := r.UnmarshalBinary(withSections(t, tc.tail))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if len(r.Rows) != 0 || r.Source != (Source{}) {
				t.Errorf("a failed decode left %+v", r)
			}
		})
	}
}
