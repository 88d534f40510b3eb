package quota

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// MaxReportTenants bounds the quota usage of one report and the verdicts
// of one reply.
const MaxReportTenants = 10_000

// Usages is the report section (tag 2) of a process's per-tenant quota
// usage in a window (Gate.Cut), for fleet-wide limits:
//
//	u n | n × (u len | tenant | tier byte | f64 admitted | f64 refused)
//
// The reply answers with the verdicts of the tenants the process must
// limit (MarshalVerdicts, UnmarshalVerdicts).
type Usages []Usage

var _ report.Section = Usages(nil)

// SectionTag implements report.Section.
func (Usages) SectionTag() uint64 { return 2 }

// AppendSection implements report.Section.
func (us Usages) AppendSection(b []byte) ([]byte, error) {
	if len(us) > MaxReportTenants {
		return nil, fmt.Errorf("%w: %d quota tenants, at most %d", report.ErrTooLarge, len(us), MaxReportTenants)
	}
	b = binary.AppendUvarint(b, uint64(len(us)))
	for i, u := range us {
		switch {
		case u.Tenant == "" || len(u.Tenant) > report.MaxStringLen:
			return nil, fmt.Errorf("%w: quota usage %d: tenant of %d bytes (want 1 to %d)", report.ErrInvalid, i, len(u.Tenant), report.MaxStringLen)
		case u.Tier != tenant.TierUnset && !u.Tier.Valid():
			return nil, fmt.Errorf("%w: quota usage %d: tier %d", report.ErrInvalid, i, uint8(u.Tier))
		case !finite(u.Admitted) || u.Admitted < 0 || !finite(u.Refused) || u.Refused < 0:
			return nil, fmt.Errorf("%w: quota usage %d (%s): admitted %v, refused %v", report.ErrInvalid, i, u.Tenant, u.Admitted, u.Refused)
		}
		b = binary.AppendUvarint(b, uint64(len(u.Tenant)))
		b = append(b, u.Tenant...)
		b = append(b, byte(u.Tier))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(u.Admitted))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(u.Refused))
	}
	return b, nil
}

// DecodeSection implements report.Section.
func (Usages) DecodeSection(d *report.Reader) report.Section {
	n := d.Count("quota tenants", MaxReportTenants, 2+1+16)
	out := make(Usages, 0, n)
	for range n {
		var u Usage
		u.Tenant = d.String("quota tenant")
		u.Tier = tenant.Tier(d.Byte("quota tier"))
		u.Admitted = d.Float("quota admitted")
		u.Refused = d.Float("quota refused")
		if d.Err() != nil {
			return nil
		}
		if u.Tenant == "" || (u.Tier != tenant.TierUnset && !u.Tier.Valid()) {
			d.Fail(fmt.Errorf("%w: quota usage: tenant %q, tier %d", report.ErrMalformed, u.Tenant, uint8(u.Tier)))
			return nil
		}
		out = append(out, u)
	}
	if d.Err() != nil {
		return nil
	}
	return out
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// wireVerdict is a Verdict in a reply.
type wireVerdict struct {
	Tenant    string  `json:"tenant"`
	For       float64 `json:"reject_for_seconds"`
	Rate      float64 `json:"rejection_rate"`
	Allowance float64 `json:"allowance_ru_per_second"`
	Shadow    bool    `json:"shadow,omitempty"`
}

// MarshalVerdicts encodes verdicts as the quotas of a report.Reply (nil
// for none). Each must be one UnmarshalVerdicts accepts.
func MarshalVerdicts(verdicts []Verdict) (json.RawMessage, error) {
	if len(verdicts) == 0 {
		return nil, nil
	}
	if len(verdicts) > MaxReportTenants {
		return nil, fmt.Errorf("%w: %d quota verdicts, at most %d", report.ErrTooLarge, len(verdicts), MaxReportTenants)
	}
	w := make([]wireVerdict, len(verdicts))
	for i, q := range verdicts {
		w[i] = wireVerdict{q.Tenant, q.For.Seconds(), q.Rate, q.Allowance, q.Shadow}
		if err := w[i].check(); err != nil {
			return nil, fmt.Errorf("%w: quota verdict %d: %v", report.ErrInvalid, i, err)
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: quotas: %v", report.ErrInvalid, err)
	}
	return b, nil
}

// UnmarshalVerdicts decodes the quotas of a report.Reply (ErrMalformed of
// package report when they are not verdicts).
func UnmarshalVerdicts(raw json.RawMessage) ([]Verdict, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var w []wireVerdict
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("%w: reply: quotas: %v", report.ErrMalformed, err)
	}
	if len(w) > MaxReportTenants {
		return nil, fmt.Errorf("%w: reply: %d quota verdicts, at most %d", report.ErrTooLarge, len(w), MaxReportTenants)
	}
	if len(w) == 0 {
		return nil, nil
	}
	out := make([]Verdict, len(w))
	for i, q := range w {
		if err := q.check(); err != nil {
			return nil, fmt.Errorf("%w: reply: quota verdict %d: %v", report.ErrMalformed, i, err)
		}
		out[i] = Verdict{Tenant: q.Tenant, For: time.Duration(q.For * float64(time.Second)), Rate: q.Rate, Allowance: q.Allowance, Shadow: q.Shadow}
	}
	return out, nil
}

func (q wireVerdict) check() error {
	if q.Tenant == "" || len(q.Tenant) > report.MaxStringLen || !(q.For > 0) || q.For > 3600 ||
		!(q.Rate >= 0 && q.Rate <= 1) || !(q.Allowance >= 0) || math.IsInf(q.Allowance, 0) {
		return fmt.Errorf("%q: for %v s, rate %v, allowance %v", q.Tenant, q.For, q.Rate, q.Allowance)
	}
	return nil
}
