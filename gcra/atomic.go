package gcra

import (
	"sync/atomic"
	"time"
)

// Atomic is a Bucket safe for concurrent use without a lock: each change
// is one compare-and-swap of its instant, so deciding for a key never
// waits for another core. The zero value is full.
//
// The rate is still the caller's: a caller that changes it while others
// charge may see one charge made at the old rate (SetRateAt keeps the
// tokens; the caller publishes the new rate after it).
type Atomic struct {
	tat atomic.Int64
}

// AllowAt reports whether the bucket holds at least need tokens at now.
func (b *Atomic) AllowAt(now time.Time, r Rate, need float64) bool {
	return r.allows(b.tat.Load(), now.UnixNano(), need)
}

// ChargeAt takes cost tokens at now, into debt if it must (see
// Bucket.ChargeAt).
func (b *Atomic) ChargeAt(now time.Time, r Rate, cost float64) {
	n := now.UnixNano()
	for {
		old := b.tat.Load()
		if b.tat.CompareAndSwap(old, r.charge(old, n, cost)) {
			return
		}
	}
}

// TakeAt admits work of known cost when the bucket is out of debt at now,
// charging cost (see Bucket.TakeAt).
func (b *Atomic) TakeAt(now time.Time, r Rate, cost float64) bool {
	n := now.UnixNano()
	for {
		old := b.tat.Load()
		if !r.allows(old, n, 0) {
			return false
		}
		if b.tat.CompareAndSwap(old, r.charge(old, n, cost)) {
			return true
		}
	}
}

// TokensAt returns the tokens the bucket holds at now; negative is debt.
func (b *Atomic) TokensAt(now time.Time, r Rate) float64 {
	return r.tokens(b.tat.Load(), now.UnixNano())
}

// WaitAt returns how long from now until the bucket holds need tokens (0
// when it does).
func (b *Atomic) WaitAt(now time.Time, r Rate, need float64) time.Duration {
	return r.wait(b.tat.Load(), now.UnixNano(), min(need, r.Burst()))
}

// SetRateAt changes the bucket's rate from from to to at now, keeping its
// tokens (see Bucket.SetRateAt).
func (b *Atomic) SetRateAt(now time.Time, from, to Rate) {
	n := now.UnixNano()
	for {
		old := b.tat.Load()
		if b.tat.CompareAndSwap(old, to.set(n, min(from.tokens(old, n), to.Burst()))) {
			return
		}
	}
}

// FullAt returns the instant from which the bucket is full.
func (b *Atomic) FullAt() time.Time { return time.Unix(0, b.tat.Load()) }
