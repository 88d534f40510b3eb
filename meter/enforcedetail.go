package meter

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

// MaxPoolWaits bounds the tenants of Report.PoolWait.
const MaxPoolWaits = 1024

// The enforcement detail section (tag 1) carries what the fixed
// enforcement block of version 2 has no place for: CoDel drops per tier
// (real and shadow), apart from tier shedding, and connection-pool wait
// per tenant:
//
//	4 × u dropped | 4 × u shadow dropped | u n | n × (s tenant | u count | u wait ns | u max ns)
func hasEnforcementDetail(r *Report) bool {
	e := &r.Enforcement
	return e.Dropped != [tenant.NumTiers]uint64{} || e.ShadowDropped != [tenant.NumTiers]uint64{} || len(r.PoolWait) > 0
}

func appendEnforcementDetail(b []byte, r *Report) ([]byte, error) {
	e := &r.Enforcement
	if len(r.PoolWait) > MaxPoolWaits {
		return nil, fmt.Errorf("%w: %d pool-wait tenants, at most %d", ErrTooLarge, len(r.PoolWait), MaxPoolWaits)
	}
	for _, v := range e.Dropped {
		b = binary.AppendUvarint(b, v)
	}
	for _, v := range e.ShadowDropped {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(r.PoolWait)))
	for _, p := range r.PoolWait {
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

func decodeEnforcementDetail(d *decoder, r *Report) {
	e := &r.Enforcement
	for i := range e.Dropped {
		e.Dropped[i] = d.uvarint("dropped")
	}
	for i := range e.ShadowDropped {
		e.ShadowDropped[i] = d.uvarint("shadow dropped")
	}
	n := d.count("pool waits", MaxPoolWaits, 4)
	if n == 0 {
		return
	}
	r.PoolWait = make([]PoolWait, 0, n)
	for range n {
		p := PoolWait{Tenant: d.string("pool-wait tenant"), Count: d.uvarint("pool-wait count")}
		w, m := d.uvarint("pool wait"), d.uvarint("pool wait max")
		if d.err != nil {
			return
		}
		if w > 1<<62 || m > 1<<62 {
			d.fail(fmt.Errorf("%w: pool wait of %d ns", ErrMalformed, max(w, m)))
			return
		}
		p.Wait, p.Max = time.Duration(w), time.Duration(m)
		r.PoolWait = append(r.PoolWait, p)
	}
}
