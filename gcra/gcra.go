// Package gcra is a token bucket kept as one instant: the generic cell
// rate algorithm's theoretical arrival time (tat). The bucket holds
//
//	tokens(now) = burst − (tat − now) / interval,   at most burst,
//
// so refill is continuous and costs nothing until the bucket is read. It
// may go into debt (tokens below zero) for callers that charge work after
// it is done with its real cost: overage is remembered, not forgiven, and
// the debt is capped (see [Rate.WithMaxDebt]) so that an absurd charge
// cannot overflow the clock arithmetic.
//
// Every method takes the time as an argument, as x/time/rate's AllowN and
// TokensAt do; a clock that goes backwards never creates tokens. The rate
// is an argument too, kept by the caller (one per limit, shared by its
// buckets), so that a bucket is eight bytes and changing a limit touches
// no bucket. Nothing allocates.
//
// A [Bucket] is not safe for concurrent use: keep it under the lock that
// guards what it belongs to. An [Atomic] is the same bucket updated by
// compare-and-swap, safe for concurrent use without a lock. The zero value
// of either is a full bucket (at any instant after 1970).
//
// Admission for work whose cost is known only afterwards:
//
//	if !b.AllowAt(now, r, 0) { // in debt: refuse
//		return b.WaitAt(now, r, 0)
//	}
//	… do the work …
//	b.ChargeAt(time.Now(), r, cost)
//
// and for work of known cost, x/time/rate's AllowN:
//
//	if b.AllowAt(now, r, 1) {
//		b.ChargeAt(now, r, 1)
//	}
package gcra

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrRate reports a rate or burst that is not a finite number > 0 (≥ 0
// for the burst).
var ErrRate = errors.New("gcra: invalid rate")

// DefaultMaxDebt is how far ahead of now a bucket's debt reaches at most,
// unless the rate says otherwise.
const DefaultMaxDebt = 24 * time.Hour

// Rate is a limit in the units the arithmetic uses: the interval one unit
// takes to refill, the burst as a duration of it, and the debt cap. Make
// one with NewRate; the zero Rate is not usable.
type Rate struct {
	per float64 // nanoseconds per unit
	tau int64   // the burst, in nanoseconds
	cap int64   // the debt cap: tat never runs further than this ahead of now
}

// NewRate returns a rate of perSecond units a second with a bucket of
// burst units. perSecond must be finite and > 0 (and its interval, 1e9 /
// perSecond nanoseconds, finite), burst finite and ≥ 0; a burst longer
// than the debt cap is cut to it.
func NewRate(perSecond, burst float64) (Rate, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) || math.IsInf(1e9/perSecond, 0) {
		return Rate{}, fmt.Errorf("%w: %v a second (want a finite number > 0)", ErrRate, perSecond)
	}
	if !(burst >= 0) || math.IsInf(burst, 0) {
		return Rate{}, fmt.Errorf("%w: burst %v (want a finite number ≥ 0)", ErrRate, burst)
	}
	per := 1e9 / perSecond
	c := int64(DefaultMaxDebt)
	return Rate{per: per, tau: clamp(burst*per, c), cap: c}, nil
}

// WithBurstDuration returns r with a burst of what it refills in d (cut
// to the debt cap).
func (r Rate) WithBurstDuration(d time.Duration) Rate {
	r.tau = clamp(float64(d), r.cap)
	return r
}

// WithMaxDebt returns r with its debt cap at d (> 0): a charge never moves
// the bucket's full instant further than d ahead of now. A burst longer
// than d is cut to it.
func (r Rate) WithMaxDebt(d time.Duration) Rate {
	r.cap = max(int64(d), 1)
	r.tau = min(r.tau, r.cap)
	return r
}

// PerSecond returns the units r refills a second.
func (r Rate) PerSecond() float64 { return 1e9 / r.per }

// Burst returns the units a full bucket holds.
func (r Rate) Burst() float64 { return float64(r.tau) / r.per }

// clamp converts v nanoseconds to an int64 in [0, c].
func clamp(v float64, c int64) int64 {
	if !(v > 0) {
		return 0
	}
	if v >= float64(c) {
		return c
	}
	return int64(v)
}

// The arithmetic, on the tat (unix ns) and now (unix ns). Both Bucket and
// Atomic use these and nothing else.

func (r Rate) tokens(tat, n int64) float64 {
	if tat <= n {
		return float64(r.tau) / r.per
	}
	return float64(r.tau-(tat-n)) / r.per
}

// allows: the bucket holds at least need tokens. need 0 is the common
// case and costs one comparison.
func (r Rate) allows(tat, n int64, need float64) bool {
	if need <= 0 {
		return tat-n <= r.tau
	}
	return float64(r.tau-(tat-n)) >= need*r.per
}

func (r Rate) wait(tat, n int64, need float64) time.Duration {
	d := tat - n - r.tau
	if need > 0 {
		d += int64(math.Ceil(min(need*r.per, float64(r.cap))))
	}
	return time.Duration(max(d, 0))
}

// charge returns the tat after taking cost units at n. A negative cost
// gives units back (a full bucket stays full); NaN changes nothing.
func (r Rate) charge(tat, n int64, cost float64) int64 {
	c := cost * r.per
	if c >= 0 && c < float64(r.cap) { // the common case first
		return min(max(tat, n)+int64(c), n+r.cap)
	}
	switch {
	case c >= float64(r.cap):
		return n + r.cap
	case c <= float64(n-max(tat, n)):
		return min(tat, n)
	case c < 0:
		return max(tat, n) + int64(c)
	}
	return tat // NaN
}

// set returns the tat of a bucket holding tokens at n (at most the burst;
// below zero is debt, capped).
func (r Rate) set(n int64, tokens float64) int64 {
	if tokens != tokens {
		tokens = 0
	}
	return n + clamp((float64(r.tau)/r.per-tokens)*r.per, r.cap)
}

// Bucket is a token bucket of one int64. Not safe for concurrent use; the
// zero value is full.
type Bucket struct {
	tat int64 // unix ns at which the bucket is full again
}

// AllowAt reports whether the bucket holds at least need tokens at now.
// It takes nothing. need 0 asks whether the bucket is out of debt.
func (b *Bucket) AllowAt(now time.Time, r Rate, need float64) bool {
	return r.allows(b.tat, now.UnixNano(), need)
}

// ChargeAt takes cost tokens at now, into debt if it must (down to the
// rate's debt cap). A negative cost gives tokens back, never above the
// burst; NaN is ignored.
func (b *Bucket) ChargeAt(now time.Time, r Rate, cost float64) {
	b.tat = r.charge(b.tat, now.UnixNano(), cost)
}

// TakeAt admits work of known cost when the bucket is out of debt at now:
// it charges cost (into debt if the bucket holds less) and returns true.
func (b *Bucket) TakeAt(now time.Time, r Rate, cost float64) bool {
	n := now.UnixNano()
	if !r.allows(b.tat, n, 0) {
		return false
	}
	b.tat = r.charge(b.tat, n, cost)
	return true
}

// TokensAt returns the tokens the bucket holds at now; negative is debt.
func (b *Bucket) TokensAt(now time.Time, r Rate) float64 { return r.tokens(b.tat, now.UnixNano()) }

// WaitAt returns how long from now until the bucket holds need tokens (0
// when it does). need above the burst waits for the burst.
func (b *Bucket) WaitAt(now time.Time, r Rate, need float64) time.Duration {
	return r.wait(b.tat, now.UnixNano(), min(need, r.Burst()))
}

// SetAt makes the bucket hold tokens at now (at most r's burst; negative
// is debt).
func (b *Bucket) SetAt(now time.Time, r Rate, tokens float64) { b.tat = r.set(now.UnixNano(), tokens) }

// SetRateAt changes the bucket's rate from from to to at now, keeping the
// tokens it holds: debt stays debt, a fuller bucket is cut to the new
// burst.
func (b *Bucket) SetRateAt(now time.Time, from, to Rate) {
	n := now.UnixNano()
	b.tat = to.set(n, min(from.tokens(b.tat, n), to.Burst()))
}

// FullAt returns the instant from which the bucket is full.
func (b *Bucket) FullAt() time.Time { return time.Unix(0, b.tat) }
