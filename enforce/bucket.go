package enforce

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
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
const maxDebt = 24 * time.Hour

// params is a Limit in the units the hot path uses.
type params struct {
	limit   Limit
	nsPerRU float64
	burstNs int64
	gen     uint64
}

func newParams(l Limit, gen uint64) *params {
	ns := 1e9 / l.RUPerSecond
	return &params{limit: l, nsPerRU: ns, burstNs: clampNs(l.Burst * ns), gen: gen}
}

func clampNs(v float64) int64 {
	if v > float64(maxDebt) {
		return int64(maxDebt)
	}
	if v < 0 {
		return 0
	}
	return int64(v)
}

// Bucket is an RU token bucket refilled continuously, charged after the
// work with its real cost. It may go into debt: a tenant that just ran a
// 100,000-row scan is refused until refill brings the bucket back above
// zero, so overage is remembered rather than forgiven.
//
// The state is one atomic instant (the generic cell rate algorithm's
// theoretical arrival time): tokens(now) = Burst − (tat − now) × rate,
// capped at Burst. Every method takes the time as an argument and is safe
// for concurrent use; a clock that goes backwards never creates tokens.
// Make one with NewBucket.
type Bucket struct {
	tat atomic.Int64 // unix ns
	p   atomic.Pointer[params]
	mu  sync.Mutex // serialises limit changes only
}

// NewBucket returns a full bucket with limit l.
func NewBucket(l Limit) (*Bucket, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	b := &Bucket{}
	b.p.Store(newParams(l, 0))
	b.tat.Store(math.MinInt64 / 2)
	return b, nil
}

// Limit returns the bucket's current limit.
func (b *Bucket) Limit() Limit { return b.p.Load().limit }

// AllowAt reports whether work may start at now: the bucket holds more
// than zero tokens. It charges nothing; charge the real cost with ChargeAt
// when the work is done.
func (b *Bucket) AllowAt(now time.Time) bool {
	return b.tat.Load()-now.UnixNano() < b.p.Load().burstNs
}

// ChargeAt takes ru tokens at now, going into debt if needed. A negative
// or NaN charge is ignored.
func (b *Bucket) ChargeAt(now time.Time, ru float64) {
	if !(ru > 0) {
		return
	}
	b.charge(now.UnixNano(), ru*b.p.Load().nsPerRU)
}

func (b *Bucket) charge(n int64, costNs float64) {
	c := clampNs(costNs)
	for {
		old := b.tat.Load()
		base := max(old, n)
		nt := base + c
		if nt-n > int64(maxDebt) {
			nt = n + int64(maxDebt)
		}
		if b.tat.CompareAndSwap(old, nt) {
			return
		}
	}
}

// TakeAt admits work of known cost ru: when the bucket holds more than
// zero tokens it charges ru (possibly into debt) and returns true.
func (b *Bucket) TakeAt(now time.Time, ru float64) bool {
	n := now.UnixNano()
	p := b.p.Load()
	c := clampNs(ru * p.nsPerRU)
	for {
		old := b.tat.Load()
		if old-n >= p.burstNs {
			return false
		}
		nt := max(old, n) + c
		if nt-n > int64(maxDebt) {
			nt = n + int64(maxDebt)
		}
		if b.tat.CompareAndSwap(old, nt) {
			return true
		}
	}
}

// TokensAt returns the tokens in the bucket at now; negative means debt.
func (b *Bucket) TokensAt(now time.Time) float64 {
	return tokens(b.p.Load(), b.tat.Load(), now.UnixNano())
}

func tokens(p *params, tat, n int64) float64 {
	if tat <= n {
		return p.limit.Burst
	}
	return float64(p.burstNs-(tat-n)) / p.nsPerRU
}

// RetryAfterAt returns how long from now until the bucket holds more than
// zero tokens again: 0 when it already does.
func (b *Bucket) RetryAfterAt(now time.Time) time.Duration {
	return retryAfter(b.p.Load(), b.tat.Load(), now.UnixNano())
}

func retryAfter(p *params, tat, n int64) time.Duration {
	d := tat - n - p.burstNs
	if d < 0 {
		return 0
	}
	return time.Duration(d) + 1
}

// SetLimitAt changes the bucket's limit at now, keeping the tokens it
// holds (debt stays debt; a fuller bucket is capped at the new burst).
func (b *Bucket) SetLimitAt(now time.Time, l Limit) error {
	if err := l.Validate(); err != nil {
		return err
	}
	b.setParams(now.UnixNano(), newParams(l, b.p.Load().gen))
	return nil
}

func (b *Bucket) setParams(n int64, np *params) {
	b.mu.Lock()
	defer b.mu.Unlock()
	op := b.p.Load()
	for {
		old := b.tat.Load()
		tk := min(tokens(op, old, n), np.limit.Burst)
		nt := n + clampNs((np.limit.Burst-tk)*np.nsPerRU)
		if b.tat.CompareAndSwap(old, nt) {
			// A charge racing with the change may use the old rate once.
			b.p.Store(np)
			return
		}
	}
}
