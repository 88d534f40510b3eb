package report

import (
	"encoding/binary"
	"fmt"
)

// MaxPolicyTagLen bounds PolicyView.Tag.
const MaxPolicyTagLen = 64

// PolicyView is section 5 of a report: the process takes its policy as a
// per-process view (policy.View) and holds the view tagged Tag ("" for
// none yet),
//
//	u len | Tag
//
// A collector that knows the section answers in Reply.PolicyView with the
// process's part of the policy only, or with "unchanged" while that part
// is the one the process holds; a collector that does not skips the
// section and sends the whole policy in Reply.Policy, as before. A
// process that does not send the section gets the whole policy.
type PolicyView struct {
	Tag string
}

// SectionTag implements Section.
func (PolicyView) SectionTag() uint64 { return 5 }

// AppendSection implements Section.
func (v PolicyView) AppendSection(b []byte) ([]byte, error) {
	if len(v.Tag) > MaxPolicyTagLen {
		return nil, fmt.Errorf("%w: policy view tag of %d bytes, at most %d", ErrTooLarge, len(v.Tag), MaxPolicyTagLen)
	}
	b = binary.AppendUvarint(b, uint64(len(v.Tag)))
	return append(b, v.Tag...), nil
}

// DecodeSection implements Section.
func (PolicyView) DecodeSection(d *Reader) Section {
	n := d.Uvarint("policy view tag")
	if d.Err() == nil && n > MaxPolicyTagLen {
		d.Fail(fmt.Errorf("%w: policy view tag of %d bytes, at most %d", ErrTooLarge, n, MaxPolicyTagLen))
	}
	if d.Err() != nil {
		return nil
	}
	return PolicyView{Tag: string(d.Bytes(n, "policy view tag"))}
}
