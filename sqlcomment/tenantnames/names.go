// Package tenantnames is the report section in which a process tells the
// collector the tenant behind each short id that session tagging wrote in
// application_name (comment.TenantID): sqlcomment.TenantNames makes it,
// the collector reads it and names those sessions' tenants.
package tenantnames

import (
	"encoding/binary"
	"fmt"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/tenant"
)

// MaxReportNames bounds the names of one report's Names section; a
// process with more to send sends the rest in its next reports.
const MaxReportNames = 256

// Names is the report section (tag 6) in which a process tells the
// collector the tenant behind each short id its session tagging wrote in
// application_name (comment.TenantID), so that the collector's pg_stat_activity
// sampler names the tenant:
//
//	u n | n × (u len | id | u len | name)
//
// Each id must be the comment.TenantID of its name: a section cannot rename
// another tenant's sessions.
type Names []Name

// Name is one id and the tenant name behind it.
type Name struct{ ID, Name string }

var _ report.Section = Names(nil)

// SectionTag implements report.Section.
func (Names) SectionTag() uint64 { return 6 }

// AppendSection implements report.Section.
func (ns Names) AppendSection(b []byte) ([]byte, error) {
	if len(ns) > MaxReportNames {
		return nil, fmt.Errorf("%w: %d tenant names, at most %d", report.ErrTooLarge, len(ns), MaxReportNames)
	}
	b = binary.AppendUvarint(b, uint64(len(ns)))
	for i, n := range ns {
		if err := n.check(); err != nil {
			return nil, fmt.Errorf("%w: tenant name %d: %w", report.ErrInvalid, i, err)
		}
		b = binary.AppendUvarint(b, uint64(len(n.ID)))
		b = append(b, n.ID...)
		b = binary.AppendUvarint(b, uint64(len(n.Name)))
		b = append(b, n.Name...)
	}
	return b, nil
}

// check says whether n.ID is n.Name's TenantID and the name a tenant's.
func (n Name) check() error {
	if err := tenant.ValidateTenant(n.Name); err != nil {
		return err
	}
	if n.ID != comment.TenantID(n.Name) {
		return fmt.Errorf("id %q is not the TenantID of %q", n.ID, n.Name)
	}
	return nil
}

// DecodeSection implements report.Section. A pair whose id is not its
// name's TenantID fails the section.
func (Names) DecodeSection(d *report.Reader) report.Section {
	n := d.Count("tenant names", MaxReportNames, 1+13+1+1)
	out := make(Names, 0, n)
	for range n {
		x := Name{ID: d.String("tenant id"), Name: d.String("tenant name")}
		if d.Err() != nil {
			return nil
		}
		if err := x.check(); err != nil {
			d.Fail(fmt.Errorf("%w: tenant name: %w", report.ErrMalformed, err))
			return nil
		}
		out = append(out, x)
	}
	if d.Err() != nil {
		return nil
	}
	return out
}
