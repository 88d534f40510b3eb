// Package budget holds what the database budgets and runaway rules of a
// process (package sqlcomment) did in a window, as the report section the
// collector reads: their counters and their runaway actions.
//
// The sending side fills a [Window] (sqlcomment's Budgets.WindowSource
// does it at every cut of a meter.Reporter); the collector reads it with
// report.SectionOf[budget.Window].
package budget

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/report"
)

// MaxCounters bounds the counters of one report (a policy has at most
// policy.MaxBudgets budgets and policy.MaxRunaway rules); MaxActions
// bounds its runaway actions.
const (
	MaxCounters = 512
	MaxActions  = 64
)

// maxOutcomeLen bounds an Action's outcome.
const maxOutcomeLen = 16

// Action is one runaway action of the sqlcomment wrapper during a
// report's window, for the collector's audit.
type Action struct {
	Time time.Time
	Rule string
	// Outcome is "cancelled" or "reported" (by the rule's deadline), or
	// "refused" (by its watch list).
	Outcome  string
	Duration time.Duration
	Shape    uint64
}

// Counter is what one database budget, or one runaway rule, did during a
// report's window.
type Counter struct {
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

// Since returns c less the counters of prev (c itself when a counter went
// down: the budget was set anew).
func (c Counter) Since(prev Counter) Counter {
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

// Window is the report section (tag 4) of the budget counters of a window
// and its runaway actions:
//
//	u n | n × (s id | flags byte (1 runaway, 2 enforce) | 7 × u counter)
//	| u m | m × (s unix ms | s rule | s outcome | u duration ns | 8 bytes shape)
type Window struct {
	Counters []Counter
	Actions  []Action
}

var _ report.Section = Window{}

// Empty reports whether w has nothing to say.
func (w Window) Empty() bool { return len(w.Counters) == 0 && len(w.Actions) == 0 }

// SectionTag implements report.Section.
func (Window) SectionTag() uint64 { return 4 }

// AppendSection implements report.Section.
func (w Window) AppendSection(b []byte) ([]byte, error) {
	if len(w.Counters) > MaxCounters {
		return nil, fmt.Errorf("%w: %d budget counters, at most %d", report.ErrTooLarge, len(w.Counters), MaxCounters)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Counters)))
	for _, c := range w.Counters {
		if len(c.ID) > report.MaxStringLen {
			return nil, fmt.Errorf("%w: budget id of %d bytes", report.ErrTooLarge, len(c.ID))
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
	if len(w.Actions) > MaxActions {
		return nil, fmt.Errorf("%w: %d budget actions, at most %d", report.ErrTooLarge, len(w.Actions), MaxActions)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Actions)))
	for _, a := range w.Actions {
		if len(a.Rule) > report.MaxStringLen || len(a.Outcome) > maxOutcomeLen || a.Duration < 0 {
			return nil, fmt.Errorf("%w: budget action %q %q", report.ErrInvalid, a.Rule, a.Outcome)
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
}

// DecodeSection implements report.Section.
func (Window) DecodeSection(d *report.Reader) report.Section {
	n := d.Count("budget counters", MaxCounters, 1+1+7)
	if d.Err() != nil {
		return nil
	}
	var w Window
	if n > 0 {
		w.Counters = make([]Counter, n)
	}
	for i := range w.Counters {
		c := &w.Counters[i]
		c.ID = d.String("budget id")
		flags := d.Byte("budget flags")
		if flags&^3 != 0 {
			d.Fail(fmt.Errorf("%w: budget flags %#x", report.ErrMalformed, flags))
			return nil
		}
		c.Runaway, c.Enforce = flags&1 != 0, flags&2 != 0
		for _, p := range [...]*uint64{&c.Admitted, &c.Refused, &c.Warned, &c.InTx, &c.Cancelled, &c.Reported, &c.WatchRefused} {
			*p = d.Uvarint("budget counter")
		}
	}
	m := d.Count("budget actions", MaxActions, 1+1+1+1+8)
	if d.Err() != nil {
		return nil
	}
	if m > 0 {
		w.Actions = make([]Action, m)
	}
	for i := range w.Actions {
		a := &w.Actions[i]
		a.Time = time.UnixMilli(d.Varint("budget action time")).UTC()
		a.Rule = d.String("budget action rule")
		a.Outcome = d.String("budget action outcome")
		a.Duration = time.Duration(d.Uvarint("budget action duration"))
		a.Shape = d.Fixed64("budget action shape")
		if d.Err() == nil && (len(a.Outcome) > maxOutcomeLen || a.Duration < 0) {
			d.Fail(fmt.Errorf("%w: budget action outcome %q, duration %v", report.ErrMalformed, a.Outcome, a.Duration))
		}
	}
	if d.Err() != nil {
		return nil
	}
	return w
}
