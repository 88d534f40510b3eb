package ingest

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/qtop-dev/qtop/sqlcomment"
)

// MaxBudgetCounters bounds the budget counters of one report (a policy
// has at most policy.MaxBudgets budgets and policy.MaxRunaway rules).
const MaxBudgetCounters = 512

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
		has:  func(r *Report) bool { return len(r.Budgets) > 0 },
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
			if d.err == nil {
				r.Budgets = out
			}
		},
	}
}

// BudgetSource returns a function for WithBudgetSource that reports what
// b's budgets and runaway rules did since its previous call.
func BudgetSource(b *sqlcomment.Budgets) func() []BudgetCounter {
	var mu sync.Mutex
	last := map[string]BudgetCounter{}
	return func() []BudgetCounter {
		bs, rs := b.Stats()
		mu.Lock()
		defer mu.Unlock()
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
		return out
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

// WithBudgetSource has the Reporter fill each report's Budgets with fn's
// counters for the window (fn returns the counters since its previous
// call; BudgetSource makes one from a sqlcomment.Budgets).
func WithBudgetSource(fn func() []BudgetCounter) ReporterOption {
	return reporterOption(func(c *config) { c.budgets = fn })
}
