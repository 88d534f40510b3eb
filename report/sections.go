package report

import (
	"encoding/binary"
	"fmt"
	"slices"
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

// Section is one optional part of a report, defined once by the package
// of the feature it reports (quota usage by quota, freshness by
// freshness, …). A section type is a value type: its zero value decodes
// the payload of its tag.
//
// The tags in use: 1 enforcement detail (this package), 2 quota usage, 3
// freshness, 4 database budgets, 5 the policy view a process holds
// (this package). A new section takes a new tag.
type Section interface {
	// SectionTag is the section's tag on the wire.
	SectionTag() uint64
	// AppendSection appends the section's payload to b; an error wraps
	// ErrInvalid or ErrTooLarge.
	AppendSection(b []byte) ([]byte, error)
	// DecodeSection reads a payload of the section's tag, which r holds
	// alone, and returns the section it encodes; on a failure it calls
	// r.Fail (or returns nil after a read failed). It must read the
	// payload exactly and allocate no more than its bounds allow.
	DecodeSection(r *Reader) Section
}

// SectionOf returns the section of type T that r carries.
func SectionOf[T Section](r *Report) (T, bool) {
	for _, s := range r.Sections {
		if t, ok := s.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// SetSection sets s as r's section of its tag, replacing any, and keeps
// r.Sections in tag order. It never writes into the Sections slice r
// had, which a copy of r may share.
func (r *Report) SetSection(s Section) {
	tag := s.SectionTag()
	out := make([]Section, 0, len(r.Sections)+1)
	for _, x := range r.Sections {
		if x.SectionTag() != tag {
			out = append(out, x)
		}
	}
	out = append(out, s)
	slices.SortFunc(out, func(a, b Section) int { return cmpTag(a.SectionTag(), b.SectionTag()) })
	r.Sections = out
}

func cmpTag(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Decoder decodes reports, with the section types it knows; a section of
// another tag is skipped. It holds no state beyond its section types and
// is safe for concurrent use.
type Decoder struct {
	known map[uint64]Section
}

// NewDecoder returns a decoder that knows the enforcement detail section
// and the given section types (their zero values, e.g.
// quota.Usages(nil)); a later type of a tag replaces an earlier one.
func NewDecoder(sections ...Section) *Decoder {
	d := &Decoder{known: map[uint64]Section{tagEnforcementDetail: EnforcementDetail{}}}
	for _, s := range sections {
		d.known[s.SectionTag()] = s
	}
	return d
}

// plain knows the report's own sections only.
var plain = NewDecoder()

func appendSections(b []byte, r *Report) ([]byte, error) {
	if len(r.Sections) > maxSections {
		return nil, fmt.Errorf("%w: %d sections, at most %d", ErrTooLarge, len(r.Sections), maxSections)
	}
	secs := r.Sections
	if !slices.IsSortedFunc(secs, func(a, b Section) int { return cmpTag(a.SectionTag(), b.SectionTag()) }) {
		secs = slices.SortedFunc(slices.Values(secs), func(a, b Section) int { return cmpTag(a.SectionTag(), b.SectionTag()) })
	}
	b = binary.AppendUvarint(b, uint64(len(secs)))
	for i, s := range secs {
		tag := s.SectionTag()
		if i > 0 && secs[i-1].SectionTag() == tag {
			return nil, fmt.Errorf("%w: two sections of tag %d", ErrInvalid, tag)
		}
		b = binary.AppendUvarint(b, tag)
		// The payload's length is known once it is written: write it,
		// then slide it behind its prefix.
		at := len(b)
		var err error
		if b, err = s.AppendSection(b); err != nil {
			return nil, fmt.Errorf("section %d: %w", tag, err)
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

func (d *Reader) sections(r *Report, known map[uint64]Section) {
	n := d.Count("sections", maxSections, 2)
	last, first := uint64(0), true
	for range n {
		tag := d.Uvarint("section tag")
		size := d.Uvarint("section length")
		payload := d.Bytes(size, "section")
		if d.err != nil {
			return
		}
		if !first && tag <= last {
			d.Fail(fmt.Errorf("%w: section %d after section %d (tags must increase)", ErrMalformed, tag, last))
			return
		}
		first, last = false, tag
		proto, ok := known[tag]
		if !ok {
			continue
		}
		sd := Reader{b: payload}
		s := proto.DecodeSection(&sd)
		switch {
		case sd.err != nil:
			d.Fail(fmt.Errorf("section %d: %w", tag, sd.err))
		case len(sd.b) != 0:
			d.Fail(fmt.Errorf("%w: section %d: %d trailing bytes", ErrMalformed, tag, len(sd.b)))
		case s == nil:
			d.Fail(fmt.Errorf("%w: section %d: no section decoded", ErrMalformed, tag))
		default:
			r.Sections = append(r.Sections, s)
		}
	}
}
