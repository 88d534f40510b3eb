package report

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// PoolWait is the time one tenant's work waited for a database connection
// from a pool during the window: where a noisy neighbour shows first when
// it exhausts the pool.
type PoolWait struct {
	Tenant string
	// Count is the number of acquisitions, Wait their summed waiting time
	// and Max the longest.
	Count     uint64
	Wait, Max time.Duration
}

// MaxPoolWaits bounds the tenants of EnforcementDetail.PoolWait.
const MaxPoolWaits = 1024

const tagEnforcementDetail = 1

// EnforcementDetail is the section (tag 1) of what the fixed enforcement
// block has no place for: CoDel drops per tier (real and shadow, index
// tenant.Tier.Index()), apart from tier shedding, and connection-pool wait
// per tenant. Every Decoder knows it.
//
//	4 × u dropped | 4 × u shadow dropped | u n | n × (s tenant | u count | u wait ns | u max ns)
type EnforcementDetail struct {
	Dropped, ShadowDropped [tenant.NumTiers]uint64
	PoolWait               []PoolWait
}

var _ Section = EnforcementDetail{}

// Empty reports whether e has nothing to say (and so is not sent).
func (e EnforcementDetail) Empty() bool {
	return e.Dropped == [tenant.NumTiers]uint64{} && e.ShadowDropped == [tenant.NumTiers]uint64{} && len(e.PoolWait) == 0
}

// SectionTag implements Section.
func (EnforcementDetail) SectionTag() uint64 { return tagEnforcementDetail }

// AppendSection implements Section.
func (e EnforcementDetail) AppendSection(b []byte) ([]byte, error) {
	if len(e.PoolWait) > MaxPoolWaits {
		return nil, fmt.Errorf("%w: %d pool-wait tenants, at most %d", ErrTooLarge, len(e.PoolWait), MaxPoolWaits)
	}
	for _, v := range e.Dropped {
		b = binary.AppendUvarint(b, v)
	}
	for _, v := range e.ShadowDropped {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(e.PoolWait)))
	for _, p := range e.PoolWait {
		if len(p.Tenant) > MaxStringLen {
			return nil, fmt.Errorf("%w: pool-wait tenant of %d bytes, at most %d", ErrTooLarge, len(p.Tenant), MaxStringLen)
		}
		if p.Wait < 0 || p.Max < 0 {
			return nil, fmt.Errorf("%w: negative pool wait of %q", ErrInvalid, p.Tenant)
		}
		b = binary.AppendUvarint(b, uint64(len(p.Tenant)))
		b = append(b, p.Tenant...)
		b = binary.AppendUvarint(b, p.Count)
		b = binary.AppendUvarint(b, uint64(p.Wait))
		b = binary.AppendUvarint(b, uint64(p.Max))
	}
	return b, nil
}

// DecodeSection implements Section.
func (EnforcementDetail) DecodeSection(d *Reader) Section {
	var e EnforcementDetail
	for i := range e.Dropped {
		e.Dropped[i] = d.Uvarint("dropped")
	}
	for i := range e.ShadowDropped {
		e.ShadowDropped[i] = d.Uvarint("shadow dropped")
	}
	n := d.Count("pool waits", MaxPoolWaits, 4)
	if n > 0 {
		e.PoolWait = make([]PoolWait, 0, n)
	}
	for range n {
		p := PoolWait{Tenant: d.String("pool-wait tenant"), Count: d.Uvarint("pool-wait count")}
		w, m := d.Uvarint("pool wait"), d.Uvarint("pool wait max")
		if d.err != nil {
			return nil
		}
		if w > 1<<62 || m > 1<<62 {
			d.Fail(fmt.Errorf("%w: pool wait of %d ns", ErrMalformed, max(w, m)))
			return nil
		}
		p.Wait, p.Max = time.Duration(w), time.Duration(m)
		e.PoolWait = append(e.PoolWait, p)
	}
	if d.err != nil {
		return nil
	}
	return e
}
