package meter

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/tenant"
)

// Section 2 of a report: per-tenant quota usage, what the process admitted
// and refused in RU for each tenant during the window (quota.Usage), for
// fleet-wide limits.
//
//	u n | n × (u len | tenant | tier byte | f64 admitted | f64 refused)
//
// The reply answers with the quota verdicts of the tenants the process
// must limit (Reply.Quotas).

// MaxQuotaTenants bounds the quota usage of one report and the verdicts of
// one reply.
const MaxQuotaTenants = 10_000

const quotaSectionTag = 2

var quotaSection = section{
	tag:  quotaSectionTag,
	name: "quota",
	has:  func(r *Report) bool { return len(r.Quota) > 0 },
	appendTo: func(b []byte, r *Report) ([]byte, error) {
		if len(r.Quota) > MaxQuotaTenants {
			return nil, fmt.Errorf("%w: %d quota tenants, at most %d", ErrTooLarge, len(r.Quota), MaxQuotaTenants)
		}
		b = binary.AppendUvarint(b, uint64(len(r.Quota)))
		for i, u := range r.Quota {
			switch {
			case u.Tenant == "" || len(u.Tenant) > MaxStringLen:
				return nil, fmt.Errorf("%w: quota usage %d: tenant of %d bytes (want 1 to %d)", ErrInvalid, i, len(u.Tenant), MaxStringLen)
			case u.Tier != tenant.TierUnset && !u.Tier.Valid():
				return nil, fmt.Errorf("%w: quota usage %d: tier %d", ErrInvalid, i, uint8(u.Tier))
			case !finite(u.Admitted) || u.Admitted < 0 || !finite(u.Refused) || u.Refused < 0:
				return nil, fmt.Errorf("%w: quota usage %d (%s): admitted %v, refused %v", ErrInvalid, i, u.Tenant, u.Admitted, u.Refused)
			}
			b = binary.AppendUvarint(b, uint64(len(u.Tenant)))
			b = append(b, u.Tenant...)
			b = append(b, byte(u.Tier))
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(u.Admitted))
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(u.Refused))
		}
		return b, nil
	},
	decode: func(d *decoder, r *Report) {
		n := d.count("quota tenants", MaxQuotaTenants, 2+1+16)
		r.Quota = make([]quota.Usage, 0, n)
		for range n {
			var u quota.Usage
			u.Tenant = d.string("quota tenant")
			u.Tier = tenant.Tier(d.byte("quota tier"))
			u.Admitted = d.float("quota admitted")
			u.Refused = d.float("quota refused")
			if d.err != nil {
				return
			}
			if u.Tenant == "" || (u.Tier != tenant.TierUnset && !u.Tier.Valid()) {
				d.fail(fmt.Errorf("%w: quota usage: tenant %q, tier %d", ErrMalformed, u.Tenant, uint8(u.Tier)))
				return
			}
			r.Quota = append(r.Quota, u)
		}
	},
}

// wireVerdict is a quota.Verdict in a reply.
type wireVerdict struct {
	Tenant    string  `json:"tenant"`
	For       float64 `json:"reject_for_seconds"`
	Rate      float64 `json:"rejection_rate"`
	Allowance float64 `json:"allowance_ru_per_second"`
	Shadow    bool    `json:"shadow,omitempty"`
}

func toWireVerdicts(v []quota.Verdict) []wireVerdict {
	if len(v) == 0 {
		return nil
	}
	out := make([]wireVerdict, len(v))
	for i, q := range v {
		out[i] = wireVerdict{q.Tenant, q.For.Seconds(), q.Rate, q.Allowance, q.Shadow}
	}
	return out
}

func fromWireVerdicts(w []wireVerdict) ([]quota.Verdict, error) {
	if len(w) > MaxQuotaTenants {
		return nil, fmt.Errorf("%w: reply: %d quota verdicts, at most %d", ErrTooLarge, len(w), MaxQuotaTenants)
	}
	if len(w) == 0 {
		return nil, nil
	}
	out := make([]quota.Verdict, len(w))
	for i, q := range w {
		if q.Tenant == "" || len(q.Tenant) > MaxStringLen || !(q.For > 0) || q.For > 3600 ||
			!(q.Rate >= 0 && q.Rate <= 1) || !(q.Allowance >= 0) || math.IsInf(q.Allowance, 0) {
			return nil, fmt.Errorf("%w: reply: quota verdict %d (%q): for %v s, rate %v, allowance %v", ErrMalformed, i, q.Tenant, q.For, q.Rate, q.Allowance)
		}
		out[i] = quota.Verdict{Tenant: q.Tenant, For: time.Duration(q.For * float64(time.Second)), Rate: q.Rate, Allowance: q.Allowance, Shadow: q.Shadow}
	}
	return out, nil
}

// AppendQuotas returns reply, an encoded Reply without quotas (such as
// the collector's cached one), with verdicts added, so that the policy it
// carries need not be encoded again for every report.
func AppendQuotas(reply []byte, verdicts []quota.Verdict) ([]byte, error) {
	if len(verdicts) == 0 {
		return reply, nil
	}
	if len(verdicts) > MaxQuotaTenants {
		return nil, fmt.Errorf("%w: %d quota verdicts, at most %d", ErrTooLarge, len(verdicts), MaxQuotaTenants)
	}
	for i, v := range verdicts {
		if _, err := fromWireVerdicts([]wireVerdict{toWireVerdicts([]quota.Verdict{v})[0]}); err != nil {
			return nil, fmt.Errorf("%w: quota verdict %d: %v", ErrInvalid, i, err)
		}
	}
	body := bytes.TrimRight(reply, " \n")
	if len(body) < 2 || body[len(body)-1] != '}' || bytes.Contains(body, []byte(`"quotas":`)) {
		return nil, fmt.Errorf("%w: not an encoded reply without quotas", ErrInvalid)
	}
	q, err := json.Marshal(toWireVerdicts(verdicts))
	if err != nil {
		return nil, fmt.Errorf("%w: quotas: %v", ErrInvalid, err)
	}
	out := make([]byte, 0, len(body)+len(q)+12)
	out = append(out, body[:len(body)-1]...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"quotas":`...)
	out = append(out, q...)
	out = append(out, '}')
	if len(out) > MaxReplyBytes {
		return nil, fmt.Errorf("%w: reply of %d bytes, at most %d", ErrTooLarge, len(out), MaxReplyBytes)
	}
	return out, nil
}
