package sqlcomment

import (
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Admit checks the statement query with tags t, sent by a wrapper with
// configuration cfg, against the budgets and the runaway watch list at
// now. inTx says the statement runs inside an open transaction, where it
// is never refused (see Transactions in the Budgets doc). It returns the
// ticket to pass to Finish when the statement is done, or a *BudgetError
// when an Enforce budget or a watch refuses it (the ticket is then zero,
// and nothing is charged). It does not allocate unless it refuses.
func (b *Budgets) Admit(now time.Time, t *tenant.Tags, cfg *config, query string, inTx bool) (Ticket, error) {
	s := b.cur.Load()
	var tk Ticket
	tk.inTx, tk.start = inTx, now
	if len(s.all) == 0 && len(s.rules) == 0 {
		return tk, nil
	}
	tk.shape = b.shapes.shape(query)
	ns := now.UnixNano()
	for _, r := range s.rules {
		if (r.expires == 0 || ns < r.expires) && matches(r.alts, t, cfg) {
			tk.rule = r
			break
		}
	}
	if tk.rule != nil && b.nwatch.Load() > 0 && !inTx {
		if err := b.watched(tk.rule, tk.shape, ns); err != nil {
			return Ticket{}, err
		}
	}
	if len(s.all) == 0 {
		return tk, nil
	}
	if err := b.admitList(&tk, s.general, t, cfg, now); err != nil {
		return Ticket{}, err
	}
	if t.Tenant != "" && len(s.byTenant) > 0 {
		if err := b.admitList(&tk, s.byTenant[t.Tenant], t, cfg, now); err != nil {
			return Ticket{}, err
		}
	}
	return tk, nil
}

func (b *Budgets) admitList(tk *Ticket, list []*budget, t *tenant.Tags, cfg *config, now time.Time) error {
	ns := now.UnixNano()
	for _, bu := range list {
		if (bu.expires != 0 && ns >= bu.expires) || !matches(bu.alts, t, cfg) {
			continue
		}
		if int(tk.n) == maxApply {
			bu.st.stats.overflows.Add(1)
			continue
		}
		key := ""
		if bu.each != "" {
			key = tagValue(bu.each, t, cfg)
		}
		if err := b.charge(tk, bu, key, now, ns); err != nil {
			b.release(tk, now)
			return err
		}
	}
	return nil
}

// charge admits the statement of tk to bu's bucket for key at now (ns in
// unix nanoseconds), or returns the refusal.
func (b *Budgets) charge(tk *Ticket, bu *budget, key string, now time.Time, ns int64) error {
	// The fleet's slot first, outside the lock: it is a round trip.
	var fk string
	var fleetHeld, fleetFull bool
	var fleetRetry time.Duration
	if !tk.inTx {
		fk, fleetHeld, fleetFull, fleetRetry = b.fleetAcquire(bu, key)
	}
	st := bu.st
	st.mu.Lock()
	k := st.bucketFor(key, ns)
	est := st.estimate(k, tk.shape, bu.coldStart(b.cfg.coldStart))
	var lim Limit
	var retry float64
	switch {
	case bu.perStmt > 0 && est > bu.perStmt:
		lim = LimitStatement
	case bu.conc > 0 && k.inFlight >= bu.conc:
		lim, retry = LimitConcurrency, est
	case fleetFull:
		lim, retry = LimitConcurrency, max(fleetRetry.Seconds(), est)
	case bu.share > 0 && !k.share.AllowAt(now, bu.rate, min(est, bu.capacity)):
		lim, retry = LimitShare, k.share.WaitAt(now, bu.rate, est).Seconds()
	}
	how := handledWarned
	if lim != 0 {
		if tk.inTx {
			how = handledInTx
		} else if bu.enforce {
			how = handledRefused
		}
		st.stats.viol[lim-1][how].Add(1)
		if how == handledRefused {
			st.mu.Unlock()
			if fleetHeld {
				b.fleetRelease(fk)
			}
			e := &BudgetError{Budget: bu.id, Key: key, Limit: lim,
				RetryAfter: time.Duration(retry * 1e9), Estimate: time.Duration(est * 1e9)}
			b.note(bu, BudgetEvent{Time: time.Unix(0, ns), Budget: bu.id, Key: key, Limit: lim,
				Handled: handledNames[how], Estimate: e.Estimate, RetryAfter: e.RetryAfter})
			return e
		}
	}
	if bu.share > 0 {
		k.share.ChargeAt(now, bu.rate, est)
	}
	k.inFlight++
	k.used = ns
	st.mu.Unlock()
	st.stats.admitted.Add(1)
	st.stats.inFlight.Add(1)
	if lim != 0 {
		b.note(bu, BudgetEvent{Time: time.Unix(0, ns), Budget: bu.id, Key: key, Limit: lim,
			Handled: handledNames[how], Estimate: time.Duration(est * 1e9), RetryAfter: time.Duration(retry * 1e9)})
	}
	if !fleetHeld {
		fk = ""
	}
	tk.slots[tk.n] = slot{b: bu, k: k, est: est, fleet: fk}
	tk.n++
	return nil
}

// release undoes the charges of tk (a later budget refused it).
func (b *Budgets) release(tk *Ticket, now time.Time) {
	for i := range int(tk.n) {
		sl := &tk.slots[i]
		st := sl.b.st
		st.mu.Lock()
		sl.k.inFlight--
		if sl.b.share > 0 {
			sl.k.share.ChargeAt(now, sl.b.rate, -sl.est)
		}
		st.mu.Unlock()
		b.fleetRelease(sl.fleet)
		st.stats.inFlight.Add(-1)
		st.stats.admitted.Add(^uint64(0))
	}
	tk.n = 0
}

// Finish records that the statement of tk took d, ending at now: each
// bucket gets the difference between d and the estimate it was charged
// (debt is remembered), the shape's history learns d, and a runaway rule
// acts (see Runaway rules in the Budgets doc). cancelled says the
// statement ended because the rule's deadline expired. It does not
// allocate unless a runaway rule acts.
func (b *Budgets) Finish(tk *Ticket, now time.Time, d time.Duration, cancelled bool) {
	sec := d.Seconds()
	ns := now.UnixNano()
	for i := range int(tk.n) {
		sl := &tk.slots[i]
		st := sl.b.st
		st.mu.Lock()
		k := sl.k
		k.inFlight--
		if sl.b.share > 0 {
			k.share.ChargeAt(now, sl.b.rate, sec-sl.est)
		}
		record(k.shapes[:], tk.shape, sec)
		k.mean.add(sec)
		record(st.shapes[:], tk.shape, sec)
		st.mu.Unlock()
		b.fleetRelease(sl.fleet)
		st.stats.inFlight.Add(-1)
	}
	tk.n = 0
	if r := tk.rule; r != nil && (cancelled || d > r.after) {
		b.runaway(r, tk.shape, ns, d, cancelled)
	}
	tk.rule = nil
}

// AdmitBegin checks a transaction about to begin with tags t (see
// Transactions in the Budgets doc): it returns a *BudgetError when an
// Enforce budget that matches has a spent share or a full concurrency. It
// charges nothing.
func (b *Budgets) AdmitBegin(now time.Time, t *tenant.Tags, cfg *config) error {
	s := b.cur.Load()
	if len(s.all) == 0 {
		return nil
	}
	ns := now.UnixNano()
	if err := b.beginList(s.general, t, cfg, ns); err != nil {
		return err
	}
	if t.Tenant != "" {
		return b.beginList(s.byTenant[t.Tenant], t, cfg, ns)
	}
	return nil
}

func (b *Budgets) beginList(list []*budget, t *tenant.Tags, cfg *config, ns int64) error {
	for _, bu := range list {
		if !bu.enforce || (bu.expires != 0 && ns >= bu.expires) || !matches(bu.alts, t, cfg) {
			continue
		}
		key := ""
		if bu.each != "" {
			key = tagValue(bu.each, t, cfg)
		}
		st := bu.st
		st.mu.Lock()
		k := st.bucketFor(key, ns)
		var lim Limit
		var retry float64
		if bu.conc > 0 && k.inFlight >= bu.conc {
			lim, retry = LimitConcurrency, st.estimate(k, 0, bu.coldStart(b.cfg.coldStart))
		} else if bu.share > 0 {
			if tokens := k.share.TokensAt(time.Unix(0, ns), bu.rate); tokens <= 0 {
				lim, retry = LimitShare, -tokens/bu.share
			}
		}
		if lim != 0 {
			st.stats.viol[lim-1][handledRefused].Add(1)
		}
		st.mu.Unlock()
		if lim != 0 {
			e := &BudgetError{Budget: bu.id, Key: key, Limit: lim, RetryAfter: time.Duration(retry * 1e9)}
			b.note(bu, BudgetEvent{Time: time.Unix(0, ns), Budget: bu.id, Key: key, Limit: lim,
				Handled: "refused_begin", RetryAfter: e.RetryAfter})
			return e
		}
	}
	return nil
}
