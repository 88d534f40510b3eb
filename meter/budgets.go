package meter

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/sqlcomment"
)

// MaxBudgetCounters bounds the budget counters of one report (a policy
// has at most policy.MaxBudgets budgets and policy.MaxRunaway rules);
// MaxBudgetActions bounds its runaway actions.
const (
	MaxBudgetCounters = 512
	MaxBudgetActions  = 64
)

// BudgetAction is one runaway action of the sqlcomment wrapper during a
// report's window, for the collector's audit.
type BudgetAction struct {
	Time time.Time
	Rule string
	// Outcome is "cancelled" or "reported" (by the rule's deadline), or
	// "refused" (by its watch list).
	Outcome  string
	Duration time.Duration
	Shape    uint64
}

// sectionBudgets is the report section of the database budget counters.
const sectionBudgets = 4

// BudgetCounter is what one database budget, or one runaway rule, of the
// sqlcomment wrapper did during a report's window (report section 4).
type BudgetCounter struct {
	ID string
	// Runaway marks a runaway rule's counters (Cancelled, Reported,
	// WatchRefused); a budget's are Admitted, Refused, Warned and InTx.
	Runaway bool
	// Enforce is true for a budget in Enforce mode.
	Enforce bool
	// Violations by how they were handled: refused before sending (the
	// begins refused included), sent with a warning, or inside a
	// transaction (sent).
	Admitted, Refused, Warned, InTx uint64
	// Runaway rules: statements cancelled by the rule's deadline, that ran
	// past it under a report rule, refused by the rule's watch list.
	Cancelled, Reported, WatchRefused uint64
}

func budgetsSection() section {
	return section{
		tag:  sectionBudgets,
		name: "budgets",
		has:  func(r *Report) bool { return len(r.Budgets) > 0 || len(r.BudgetActions) > 0 },
		appendTo: func(b []byte, r *Report) ([]byte, error) {
			if len(r.Budgets) > MaxBudgetCounters {
				return nil, fmt.Errorf("%w: %d budget counters, at most %d", ErrTooLarge, len(r.Budgets), MaxBudgetCounters)
			}
			b = binary.AppendUvarint(b, uint64(len(r.Budgets)))
			for _, c := range r.Budgets {
				if len(c.ID) > MaxStringLen {
					return nil, fmt.Errorf("%w: budget id of %d bytes", ErrTooLarge, len(c.ID))
				}
				b = binary.AppendUvarint(b, uint64(len(c.ID)))
				b = append(b, c.ID...)
				var flags byte
				if c.Runaway {
					flags |= 1
				}
				if c.Enforce {
					flags |= 2
				}
				b = append(b, flags)
				for _, v := range [...]uint64{c.Admitted, c.Refused, c.Warned, c.InTx, c.Cancelled, c.Reported, c.WatchRefused} {
					b = binary.AppendUvarint(b, v)
				}
			}
			// Then the runaway actions: u n | n × (varint unix ms | rule |
			// outcome | uvarint duration ns | 8 bytes shape).
			if len(r.BudgetActions) > MaxBudgetActions {
				return nil, fmt.Errorf("%w: %d budget actions, at most %d", ErrTooLarge, len(r.BudgetActions), MaxBudgetActions)
			}
			b = binary.AppendUvarint(b, uint64(len(r.BudgetActions)))
			for _, a := range r.BudgetActions {
				if len(a.Rule) > MaxStringLen || len(a.Outcome) > maxOutcomeLen || a.Duration < 0 {
					return nil, fmt.Errorf("%w: budget action %q %q", ErrInvalid, a.Rule, a.Outcome)
				}
				b = binary.AppendVarint(b, a.Time.UnixMilli())
				b = binary.AppendUvarint(b, uint64(len(a.Rule)))
				b = append(b, a.Rule...)
				b = binary.AppendUvarint(b, uint64(len(a.Outcome)))
				b = append(b, a.Outcome...)
				b = binary.AppendUvarint(b, uint64(a.Duration))
				b = binary.LittleEndian.AppendUint64(b, a.Shape)
			}
			return b, nil
		},
		decode: func(d *decoder, r *Report) {
			n := d.count("budget counters", MaxBudgetCounters, 1+1+7)
			if d.err != nil {
				return
			}
			out := make([]BudgetCounter, n)
			for i := range out {
				c := &out[i]
				c.ID = d.string("budget id")
				flags := d.byte("budget flags")
				if flags&^3 != 0 {
					d.fail(fmt.Errorf("%w: budget flags %#x", ErrMalformed, flags))
					return
				}
				c.Runaway, c.Enforce = flags&1 != 0, flags&2 != 0
				for _, p := range [...]*uint64{&c.Admitted, &c.Refused, &c.Warned, &c.InTx, &c.Cancelled, &c.Reported, &c.WatchRefused} {
					*p = d.uvarint("budget counter")
				}
			}
			m := d.count("budget actions", MaxBudgetActions, 1+1+1+1+8)
			if d.err != nil {
				return
			}
			var acts []BudgetAction
			if m > 0 {
				acts = make([]BudgetAction, m)
			}
			for i := range acts {
				a := &acts[i]
				a.Time = time.UnixMilli(d.varint("budget action time")).UTC()
				a.Rule = d.string("budget action rule")
				a.Outcome = d.string("budget action outcome")
				a.Duration = time.Duration(d.uvarint("budget action duration"))
				if p := d.bytes(8, "budget action shape"); p != nil {
					a.Shape = binary.LittleEndian.Uint64(p)
				}
				if d.err == nil && (len(a.Outcome) > maxOutcomeLen || a.Duration < 0) {
					d.fail(fmt.Errorf("%w: budget action outcome %q, duration %v", ErrMalformed, a.Outcome, a.Duration))
				}
			}
			if d.err == nil {
				r.Budgets, r.BudgetActions = out, acts
				if len(out) == 0 {
					r.Budgets = nil
				}
			}
		},
	}
}

// maxOutcomeLen bounds a BudgetAction's outcome.
const maxOutcomeLen = 16

// BudgetSource returns a function for WithBudgetSource that reports what
// b's budgets and runaway rules did since its previous call: their
// counters, and the runaway actions (at most MaxBudgetActions, the most
// recent).
func BudgetSource(b *sqlcomment.Budgets) func() ([]BudgetCounter, []BudgetAction) {
	var mu sync.Mutex
	last := map[string]BudgetCounter{}
	var seq uint64
	return func() ([]BudgetCounter, []BudgetAction) {
		bs, rs := b.Stats()
		mu.Lock()
		defer mu.Unlock()
		var evs []sqlcomment.BudgetEvent
		evs, seq = b.RunawayEventsSince(seq)
		if len(evs) > MaxBudgetActions {
			evs = evs[len(evs)-MaxBudgetActions:]
		}
		var acts []BudgetAction
		for _, e := range evs {
			acts = append(acts, BudgetAction{Time: e.Time, Rule: e.Budget, Outcome: e.Handled, Duration: e.Duration, Shape: e.Shape})
		}
		next := make(map[string]BudgetCounter, len(bs)+len(rs))
		var out []BudgetCounter
		for _, s := range bs {
			c := BudgetCounter{ID: s.ID, Enforce: s.Enforce, Admitted: s.Admitted}
			for l := range s.Refused {
				c.Refused += s.Refused[l]
				c.Warned += s.Warned[l]
				c.InTx += s.InTx[l]
			}
			next["b"+s.ID] = c
			if d := c.since(last["b"+s.ID]); d != (BudgetCounter{ID: s.ID, Enforce: s.Enforce}) {
				out = append(out, d)
			}
		}
		for _, s := range rs {
			c := BudgetCounter{ID: s.ID, Runaway: true, Cancelled: s.Cancelled, Reported: s.Reported, WatchRefused: s.Refused}
			next["r"+s.ID] = c
			if d := c.since(last["r"+s.ID]); d != (BudgetCounter{ID: s.ID, Runaway: true}) {
				out = append(out, d)
			}
		}
		last = next
		if len(out) > MaxBudgetCounters {
			out = out[:MaxBudgetCounters]
		}
		return out, acts
	}
}

// since returns c less the counters of prev (c itself when a counter went
// down: the budget was set anew).
func (c BudgetCounter) since(prev BudgetCounter) BudgetCounter {
	if c.Admitted < prev.Admitted || c.Refused < prev.Refused || c.Warned < prev.Warned || c.InTx < prev.InTx ||
		c.Cancelled < prev.Cancelled || c.Reported < prev.Reported || c.WatchRefused < prev.WatchRefused {
		return c
	}
	c.Admitted -= prev.Admitted
	c.Refused -= prev.Refused
	c.Warned -= prev.Warned
	c.InTx -= prev.InTx
	c.Cancelled -= prev.Cancelled
	c.Reported -= prev.Reported
	c.WatchRefused -= prev.WatchRefused
	return c
}

// WithBudgetSource has the Reporter fill each report's Budgets and
// BudgetActions with fn's for the window (fn returns those since its
// previous call; BudgetSource makes one from a sqlcomment.Budgets).
func WithBudgetSource(fn func() ([]BudgetCounter, []BudgetAction)) ReporterOption {
	return reporterOption(func(c *config) { c.budgets = fn })
}
