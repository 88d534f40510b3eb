package policy

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a rule's numbers: far above any real limit, far below what
// would overflow a bucket's arithmetic or make a typo (1e308) look valid.
const (
	// MaxRUPerSecond bounds a throttle's or a quota's rate.
	MaxRUPerSecond = 1e9
	// MaxMultiplier bounds a price rule's multiplier.
	MaxMultiplier = 100
	// MinBroadRunawaySeconds: a runaway rule that cancels or terminates
	// statements after less than this, with a match that names no tenant
	// and no route, needs ConfirmBroad, as one that matches every
	// statement does.
	MinBroadRunawaySeconds = 1
)

// validateLimits checks a rule's numbers against the bounds and its text
// against control characters.
func (r Rule) validateLimits() error {
	switch {
	case (r.Action == Throttle || r.Action == Quota) && r.RUPerSecond > MaxRUPerSecond:
		return fmt.Errorf("%w: ru_per_second %g, at most %g", ErrInvalid, r.RUPerSecond, float64(MaxRUPerSecond))
	case r.Action == Price && r.Multiplier > MaxMultiplier:
		return fmt.Errorf("%w: multiplier %g, at most %d", ErrInvalid, r.Multiplier, MaxMultiplier)
	}
	return checkText("id", r.ID, "reason", r.Reason, "created_by", r.CreatedBy)
}

// validateBroad refuses a runaway rule that would cancel or terminate
// broadly — every statement (no match), or statements of whole tiers or
// applications (a match alternative naming no tenant and no route) after
// less than MinBroadRunawaySeconds — unless ConfirmBroad says it is meant.
func (r Runaway) validateBroad() error {
	if r.Action == Report || r.ConfirmBroad {
		return nil
	}
	switch {
	case len(r.Match) == 0:
		return fmt.Errorf("%w: runaway rule %s would %s every statement of every client (no match): set confirm_broad to mean it, or add a match",
			ErrInvalid, r.ID, r.Action)
	case r.AfterSeconds < MinBroadRunawaySeconds && !narrow(r.Match):
		return fmt.Errorf("%w: runaway rule %s would %s statements of whole tiers or applications after %gs, below %ds: set confirm_broad to mean it, or match tenants or routes",
			ErrInvalid, r.ID, r.Action, r.AfterSeconds, MinBroadRunawaySeconds)
	}
	return nil
}

// validateBroad refuses an Enforce budget with no match, which may refuse
// every statement of every client, unless ConfirmBroad says it is meant.
// Warn and off budgets refuse nothing and need no confirmation.
func (b Budget) validateBroad() error {
	if b.Mode != Enforce || len(b.Match) > 0 || b.ConfirmBroad {
		return nil
	}
	return fmt.Errorf(`%w: budget %s would refuse statements of every tenant and every client (mode enforce, no match): `+
		`send "confirm_broad":true to mean it, or a match such as "match":[{"tenant":"analytics"}], or "mode":"warn"`,
		ErrInvalid, b.ID)
}

// narrow reports whether every alternative of m names a tenant or a route.
func narrow(m []map[string]string) bool {
	for _, alt := range m {
		if alt["tenant"] == "" && alt["route"] == "" {
			return false
		}
	}
	return true
}

// checkText refuses control characters (ANSI escapes among them: a
// reason must never drive a terminal) and invalid UTF-8 in the named
// fields, given as name, value pairs.
func checkText(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if s := fields[i+1]; StripControl(s) != s {
			return fmt.Errorf("%w: %s %q holds control characters or invalid UTF-8 (an ANSI escape?): send plain text",
				ErrInvalid, fields[i], StripControl(s))
		}
	}
	return nil
}

// StripControl returns s without terminal control sequences (ANSI CSI,
// OSC, and other ESC sequences, removed whole), other control and
// non-printable characters, and invalid UTF-8; tabs and line breaks
// become spaces. Text of a policy (reasons, ids, names) goes through it
// before it is shown (Policy.Sanitize), so a rule cannot drive the
// terminal of whoever looks at it.
func StripControl(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 && (s[i] == 0x9b || s[i] == 0x9d) {
			r = rune(s[i]) // a raw 8-bit CSI or OSC, which some terminals obey
		}
		switch {
		case r == 0x1b || r == 0x9b || r == 0x9d:
			i += escapeLen(s[i:], r, size)
			continue
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r == utf8.RuneError || !unicode.IsPrint(r):
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// escapeLen is the length of the escape sequence at the start of s, whose
// introducer r (ESC, or the C1 CSI or OSC) takes size bytes: CSI runs to
// a final byte 0x40–0x7E, OSC, DCS and the like to BEL or ESC \, any
// other ESC takes the next character.
func escapeLen(s string, r rune, size int) int {
	i := size
	kind := r
	if r == 0x1b {
		if i >= len(s) {
			return i
		}
		switch s[i] {
		case '[':
			kind = 0x9b
		case ']', 'P', 'X', '^', '_':
			kind = 0x9d
		default:
			_, n := utf8.DecodeRuneInString(s[i:])
			return i + n
		}
		i++
	}
	if kind == 0x9b {
		for i < len(s) {
			c := s[i]
			i++
			if c >= 0x40 && c <= 0x7e {
				return i
			}
		}
		return i
	}
	for i < len(s) {
		if s[i] == 0x07 {
			return i + 1
		}
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
			return i + 2
		}
		i++
	}
	return i
}

// Sanitize strips control sequences (StripControl) from every text of p
// that a terminal or a page may show — ids, reasons, names — and returns
// how many it changed. Validate refuses such text in what is posted;
// Sanitize is for a policy from elsewhere (an older store, a peer) before
// it is shown or handed out.
func (p *Policy) Sanitize() int {
	n := 0
	fix := func(s *string) {
		if c := StripControl(*s); c != *s {
			*s = c
			n++
		}
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		fix(&r.ID)
		fix(&r.Reason)
		fix(&r.CreatedBy)
	}
	for i := range p.Budgets {
		b := &p.Budgets[i]
		fix(&b.ID)
		fix(&b.Reason)
		fix(&b.CreatedBy)
	}
	for i := range p.Runaway {
		r := &p.Runaway[i]
		fix(&r.ID)
		fix(&r.Reason)
		fix(&r.CreatedBy)
	}
	if f := p.Freshness; f != nil {
		fix(&f.Reason)
		fix(&f.UpdatedBy)
		for i := range f.Rules {
			fix(&f.Rules[i].ID)
			fix(&f.Rules[i].Route)
		}
	}
	if a := p.Autopilot; a != nil {
		for i := range a.Allow {
			fix(&a.Allow[i])
		}
		for i := range a.Rules {
			fix(&a.Rules[i].Name)
		}
	}
	return n
}

// Upgrade makes a policy saved under older, looser checks pass Validate
// without changing what it does in practice, and says what it changed (for
// a log line): text stripped of control characters (Sanitize), rates and
// multipliers above their bounds lowered to them, and runaway rules and
// Enforce budgets that were already in force while broad marked
// ConfirmBroad (someone with the admin token set them). A collector calls
// it on the policy it loads, so a new release never refuses to start on a
// policy its predecessor took.
func (p *Policy) Upgrade() []string {
	var changes []string
	if n := p.Sanitize(); n > 0 {
		changes = append(changes, fmt.Sprintf("%d text field(s) stripped of control characters", n))
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if (r.Action == Throttle || r.Action == Quota) && r.RUPerSecond > MaxRUPerSecond {
			changes = append(changes, fmt.Sprintf("rule %s: ru_per_second %g lowered to %g", r.ID, r.RUPerSecond, float64(MaxRUPerSecond)))
			r.RUPerSecond = MaxRUPerSecond
		}
		if r.Action == Price && r.Multiplier > MaxMultiplier {
			changes = append(changes, fmt.Sprintf("rule %s: multiplier %g lowered to %d", r.ID, r.Multiplier, MaxMultiplier))
			r.Multiplier = MaxMultiplier
		}
	}
	for i := range p.Runaway {
		r := &p.Runaway[i]
		if r.validateBroad() != nil {
			r.ConfirmBroad = true
			changes = append(changes, fmt.Sprintf("runaway rule %s: broad, kept as confirmed", r.ID))
		}
	}
	for i := range p.Budgets {
		b := &p.Budgets[i]
		if b.validateBroad() != nil {
			b.ConfirmBroad = true
			changes = append(changes, fmt.Sprintf("budget %s: enforced on every statement, kept as confirmed", b.ID))
		}
	}
	return changes
}
