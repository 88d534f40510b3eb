package enforce

import (
	"math"
	"time"
)

// CoDel is the controlled-delay control law of RFC 8289, deciding for
// each item taken from a queue whether to drop it. While the sojourn time
// (how long the item waited) stays above Target for at least Interval, it
// drops items at a rate that grows with the square root of the drops so
// far, until the sojourn time falls back below Target.
//
// CoDel is not safe for concurrent use: its owner (a Queue) serialises
// calls. The zero value is not usable; make one with NewCoDel.
type CoDel struct {
	target, interval int64
	firstAbove       int64 // 0: sojourn below target
	dropNext         int64
	count, lastCount int
	dropping         bool
}

// NewCoDel returns a CoDel with the given target and interval; zero
// values take the "Fail at Scale" defaults of 5 ms and 100 ms.
func NewCoDel(target, interval time.Duration) *CoDel {
	if target <= 0 {
		target = 5 * time.Millisecond
	}
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	return &CoDel{target: int64(target), interval: int64(interval)}
}

// Dropping reports whether CoDel is in its dropping state.
func (c *CoDel) Dropping() bool { return c.dropping }

func (c *CoDel) controlLaw(t int64) int64 {
	return t + int64(float64(c.interval)/math.Sqrt(float64(c.count)))
}

// okToDrop is RFC 8289's dodequeue test.
func (c *CoDel) okToDrop(n, sojourn int64, empty bool) bool {
	if empty || sojourn < c.target {
		c.firstAbove = 0
		return false
	}
	if c.firstAbove == 0 {
		c.firstAbove = n + c.interval
		return false
	}
	return n >= c.firstAbove
}

// DropAt decides for one item dequeued at now after waiting sojourn;
// empty says whether the queue is empty once the item is taken. It
// returns true when the item should be dropped (failed early).
func (c *CoDel) DropAt(now time.Time, sojourn time.Duration, empty bool) bool {
	n := now.UnixNano()
	ok := c.okToDrop(n, int64(sojourn), empty)
	if c.dropping {
		if !ok {
			c.dropping = false
			return false
		}
		if n >= c.dropNext {
			c.count++
			c.dropNext = c.controlLaw(c.dropNext)
			return true
		}
		return false
	}
	if !ok {
		return false
	}
	c.dropping = true
	delta := c.count - c.lastCount
	if delta > 1 && n-c.dropNext < 16*c.interval {
		c.count = delta
	} else {
		c.count = 1
	}
	c.dropNext = c.controlLaw(n)
	c.lastCount = c.count
	return true
}
