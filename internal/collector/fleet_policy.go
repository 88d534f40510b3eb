package collector

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/store"
)

// One policy for the fleet (Config.SharedPolicy).
//
// The audit log in the shared store is the policy's history: every change
// posted to any collector is written there once, by that collector (as it
// always was). Every collector reads the log every policyPoll and folds it
// into the policy — add and replace set a rule by its ID, lift removes it —
// so a throttle posted to one collector is in the replies of every
// collector within policyPoll plus the read, and its processes apply it at
// their next report. Nothing but the store is shared: the log is read
// through the Distributed table on a cluster.
//
// The shared policy's Version is policy.SharedVersionBase + changes<<16,
// changes counting the log's rows: it grows with every change whatever
// collector made it, it is the same on every collector that read the same
// log, and it is above any version a single collector reached on its own
// (which also bumps it by one when rules expire; 2^16 such bumps fit
// between two changes), so a process that fails over to another collector
// never takes the same policy for an older one.

const (
	policyPoll       = 500 * time.Millisecond
	sharedPolicyBase = policy.SharedVersionBase
)

// auditLog is what a store offers for a shared policy (chstore.Store).
type auditLog interface {
	AuditLog(ctx context.Context) ([]store.Audit, error)
}

// runFleet starts the shared policy's poller, and closes the peers'
// idle connections when ctx ends.
func (f *fleet) start(ctx context.Context, wg *sync.WaitGroup) {
	if f == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		f.transport.CloseIdleConnections()
	}()
	if !f.shared {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(policyPoll)
		defer t.Stop()
		var lastErr string
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := f.pollPolicy(ctx)
			switch {
			case err != nil && err.Error() != lastErr:
				f.log.Warn("shared policy: cannot read the policy log; keeping the current policy", "err", err)
				lastErr = err.Error()
			case err == nil && lastErr != "":
				f.log.Info("shared policy: reading the policy log again")
				lastErr = ""
			}
		}
	}()
}

// pollPolicy reads the shared policy log once and adopts the fleet's
// policy when it is newer than this collector's. The collector calls it
// every policyPoll.
func (f *fleet) pollPolicy(ctx context.Context) error {
	if f.next == nil {
		return nil
	}
	st := f.next
	if l, ok := st.(*lazyStore); ok {
		var err error
		if st, err = l.get(ctx); err != nil {
			return err
		}
	}
	al, ok := st.(auditLog)
	if !ok {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	changes, err := al.AuditLog(qctx)
	if err != nil {
		return err
	}
	f.polled.Store(true)
	if p := foldPolicy(changes, f.now()); f.pol.adopt(p) {
		f.log.Info("shared policy adopted", "version", p.Version, "rules", len(p.Rules))
	}
	return nil
}

// foldPolicy replays the audit log, oldest first, into the policy active
// at now.
func foldPolicy(changes []store.Audit, now time.Time) policy.Policy {
	rules := map[string]policy.Rule{}
	p := policy.Policy{Version: sharedPolicyBase + uint64(len(changes))<<16}
	for _, a := range changes {
		if a.Action == auditAutopilotSet || a.Action == auditAutopilotPause || a.Action == auditAutopilotResume {
			// The autopilot's part, whole in each change: the last wins.
			var ap policy.Autopilot
			if json.Unmarshal([]byte(a.Rule), &ap) == nil && ap.Validate() == nil {
				p.Autopilot = &ap
				p.Updated = a.Time.UTC()
			}
			continue
		}
		var r policy.Rule
		if json.Unmarshal([]byte(a.Rule), &r) != nil || r.ID == "" {
			continue
		}
		if a.Action == "lift" {
			delete(rules, r.ID)
		} else if r.Validate() == nil {
			rules[r.ID] = r
		}
		p.Updated = a.Time.UTC()
	}
	for _, r := range rules {
		p.Rules = append(p.Rules, r)
	}
	slices.SortFunc(p.Rules, func(a, b policy.Rule) int { return cmp.Compare(a.ID, b.ID) })
	p.Rules = p.Active(now)
	if len(p.Rules) > policy.MaxRules {
		p.Rules = p.Rules[:policy.MaxRules]
	}
	return p
}
