package sqlcomment

import (
	"context"
	"strings"
	"time"
)

// FleetLimiter holds the slots of concurrency budgets across processes:
// Acquire takes one of key's slots, or says when to try again when the
// fleet is at key's limit; Release gives back one slot of a finished
// statement. lease.Semaphore is one (a Redis lease per statement, with a
// TTL, so a crashed process's slots expire); give it
// Budgets.FleetConcurrency as its limit.
type FleetLimiter interface {
	Acquire(ctx context.Context, key string) (ok bool, retry time.Duration)
	Release(key string)
}

// fleetPrefix starts the keys Budgets hands its FleetLimiter:
// "budget/<id>/<value of each>".
const fleetPrefix = "budget/"

type fleetHolder struct{ l FleetLimiter }

// SetFleetLimiter makes the concurrency limit of every budget hold across
// the processes that share l, instead of per process: a statement takes
// one of l's slots for its budget (and key) before it is sent, and gives
// it back when it ends. The local count still applies first, so a
// process never exceeds the limit on its own. Statements inside an open
// transaction take no fleet slot (they are never refused; see
// Transactions). Each such statement costs l a round trip; nil goes back
// to per-process limits.
func (b *Budgets) SetFleetLimiter(l FleetLimiter) {
	if l == nil {
		b.fleet.Store(nil)
		return
	}
	b.fleet.Store(&fleetHolder{l: l})
}

// FleetConcurrency returns the concurrency limit of the budget that key
// (as given to a FleetLimiter) names, 0 when it names none: the limit
// function of the FleetLimiter.
func (b *Budgets) FleetConcurrency(key string) int {
	rest, ok := strings.CutPrefix(key, fleetPrefix)
	if !ok {
		return 0
	}
	id, _, _ := strings.Cut(rest, "/")
	for _, bu := range b.cur.Load().all {
		if bu.id == id {
			return int(bu.conc)
		}
	}
	return 0
}

// fleetAcquire takes a fleet slot for bu and key when a FleetLimiter is
// set and bu limits concurrency; held says one was taken (and must be
// released), refused when the fleet is full.
func (b *Budgets) fleetAcquire(bu *budget, key string) (fk string, held, refused bool, retry time.Duration) {
	h := b.fleet.Load()
	if h == nil || bu.conc <= 0 {
		return "", false, false, 0
	}
	fk = fleetPrefix + bu.id + "/" + key
	ok, retry := h.l.Acquire(context.Background(), fk)
	return fk, ok, !ok, retry
}

func (b *Budgets) fleetRelease(fk string) {
	if h := b.fleet.Load(); h != nil && fk != "" {
		h.l.Release(fk)
	}
}
