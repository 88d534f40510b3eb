package enforce

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/gcra"
)

// Limit is a token-bucket rate in request units per second and the burst
// a full bucket holds.
type Limit struct {
	RUPerSecond float64 `json:"ru_per_second"`
	Burst       float64 `json:"burst"`
}

// Validate checks that the rate is finite and > 0 and the burst finite
// and ≥ 0.
func (l Limit) Validate() error {
	if !(l.RUPerSecond > 0) || math.IsInf(l.RUPerSecond, 0) {
		return fmt.Errorf("%w: rate %v RU/s (want a finite number > 0)", ErrConfig, l.RUPerSecond)
	}
	if !(l.Burst >= 0) || math.IsInf(l.Burst, 0) {
		return fmt.Errorf("%w: burst %v RU (want a finite number ≥ 0)", ErrConfig, l.Burst)
	}
	return nil
}

// maxDebt caps how far into the future a bucket's debt reaches, so that
// an absurd charge cannot overflow the clock arithmetic.
const maxDebt = gcra.DefaultMaxDebt

// params is a Limit in the units the hot path uses, and the generation of
// Buckets' limits it was resolved in.
type params struct {
	limit Limit
	rate  gcra.Rate
	gen   uint64
}

// newParams returns l's params; l is valid.
func newParams(l Limit, gen uint64) *params {
	r, _ := gcra.NewRate(l.RUPerSecond, l.Burst)
	return &params{limit: l, rate: r, gen: gen}
}

// bucket is one key's RU bucket in Buckets: a gcra.Atomic, charged after
// the work with its real cost and so possibly in debt (a tenant that just
// ran a 100,000-row scan is refused until refill brings it out of debt:
// overage is remembered rather than forgiven), and its limit, which may
// change while others charge.
type bucket struct {
	g  gcra.Atomic
	p  atomic.Pointer[params]
	mu sync.Mutex // serialises limit changes only
}

func newBucket(p *params) *bucket {
	b := &bucket{}
	b.p.Store(p)
	return b
}

// setParams changes the bucket's limit at n, keeping the tokens it holds.
func (b *bucket) setParams(n int64, np *params) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// A charge racing with the change may use the old rate once.
	b.g.SetRateAt(time.Unix(0, n), b.p.Load().rate, np.rate)
	b.p.Store(np)
}
