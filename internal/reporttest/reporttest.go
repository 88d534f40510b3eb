// Package reporttest helps test report sections: a report body that
// carries a given raw payload under a given tag, as a newer or a broken
// process would send it.
package reporttest

import (
	"time"

	"github.com/qtop-dev/qtop/report"
)

// Raw is a section of any tag whose payload is given as bytes.
type Raw struct {
	Tag     uint64
	Payload []byte
}

// SectionTag implements report.Section.
func (r Raw) SectionTag() uint64 { return r.Tag }

// AppendSection implements report.Section.
func (r Raw) AppendSection(b []byte) ([]byte, error) { return append(b, r.Payload...), nil }

// DecodeSection implements report.Section: it keeps the payload.
func (r Raw) DecodeSection(d *report.Reader) report.Section {
	return Raw{Tag: r.Tag, Payload: append([]byte(nil), d.Bytes(uint64(d.Len()), "payload")...)}
}

// Body returns the encoded body of a small report carrying sections.
func Body(sections ...report.Section) []byte {
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	r := &report.Report{Source: report.Source{Service: "api", Instance: "i1"}, Seq: 1, Start: t0, End: t0.Add(time.Second)}
	for _, s := range sections {
		r.SetSection(s)
	}
	b, err := r.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return b
}
