package meter

import (
	"encoding/binary"
	"fmt"
)

// Version 2 of the report format ends with optional sections, so that a
// part of qtop can add what it reports without a new version of the whole
// format:
//
//	u n | n × (u tag | u length | payload of length bytes)
//
// Tags are strictly increasing. A decoder skips a section whose tag it does
// not know (a newer process may send one), and each known section's decoder
// must read its payload exactly. A section is written only when it has
// something to say, so a report without them ends with a single 0 byte.

// maxSections bounds the sections of one report.
const maxSections = 64

// section is one optional part of a report: its tag on the wire, whether a
// report has it, and its encoding.
type section struct {
	tag  uint64
	name string
	// has reports whether r carries this section.
	has func(r *Report) bool
	// appendTo writes the payload.
	appendTo func(b []byte, r *Report) ([]byte, error)
	// decode reads the payload, which d holds alone, into r.
	decode func(d *decoder, r *Report)
}

// sections lists every section this build knows, by increasing tag. Each
// lives in the file of the concept it reports; add one line here per new
// section.
var sections = []section{
	{tag: 1, name: "enforcement detail", has: hasEnforcementDetail, appendTo: appendEnforcementDetail, decode: decodeEnforcementDetail},
	quotaSection,     // 2: per-tenant quota usage (quota.go)
	freshnessSection, // 3: freshness samples and counters (freshness.go)
	budgetsSection(), // 4: database budget counters (budgets.go)
}

func appendSections(b []byte, r *Report) ([]byte, error) {
	n := 0
	for i := range sections {
		if sections[i].has(r) {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for i := range sections {
		s := &sections[i]
		if !s.has(r) {
			continue
		}
		b = binary.AppendUvarint(b, s.tag)
		// The payload's length is known once it is written: write it,
		// then slide it behind its prefix.
		at := len(b)
		var err error
		if b, err = s.appendTo(b, r); err != nil {
			return nil, fmt.Errorf("%s section: %w", s.name, err)
		}
		b = slideBehindLength(b, at)
	}
	return b, nil
}

// slideBehindLength puts the uvarint length of b[at:] in front of it.
func slideBehindLength(b []byte, at int) []byte {
	n := len(b) - at
	var hdr [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(hdr[:], uint64(n))
	b = append(b, hdr[:k]...)
	copy(b[at+k:], b[at:at+n])
	copy(b[at:], hdr[:k])
	return b
}

func (d *decoder) sections(r *Report) {
	n := d.count("sections", maxSections, 2)
	last, first := uint64(0), true
	for range n {
		tag := d.uvarint("section tag")
		size := d.uvarint("section length")
		payload := d.bytes(size, "section")
		if d.err != nil {
			return
		}
		if !first && tag <= last {
			d.fail(fmt.Errorf("%w: section %d after section %d (tags must increase)", ErrMalformed, tag, last))
			return
		}
		first, last = false, tag
		for i := range sections {
			s := &sections[i]
			if s.tag != tag {
				continue
			}
			sd := decoder{b: payload}
			s.decode(&sd, r)
			switch {
			case sd.err != nil:
				d.fail(fmt.Errorf("%s section: %w", s.name, sd.err))
			case len(sd.b) != 0:
				d.fail(fmt.Errorf("%w: %s section: %d trailing bytes", ErrMalformed, s.name, len(sd.b)))
			}
			break
		}
	}
}
