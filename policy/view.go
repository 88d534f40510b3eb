package policy

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"
)

// DefaultMaxViewBytes bounds the encoded View of one process.
const DefaultMaxViewBytes = 64 << 10

// View is the part of a policy one process needs, to be carried in the
// reply to its report instead of the whole policy: the active rules of the
// tenants it reports and every active tier rule, with the budgets,
// runaway rules and freshness policy (bounded by their own counts). A
// process sends back the Tag of the view it holds; while its part is
// unchanged the reply carries only Version, Tag and Unchanged, whatever
// changed elsewhere in the policy — so a policy of 10,000 rules costs a
// process what its own rules cost, and a change to another tenant's rule
// costs it nothing.
type View struct {
	// Version is the policy's version.
	Version uint64 `json:"version"`
	// Tag identifies the content of the view (not the version): the same
	// tag, the same rules.
	Tag string `json:"tag"`
	// Unchanged says the process's view is the one it holds (its Tag):
	// nothing else is carried.
	Unchanged bool       `json:"unchanged,omitempty"`
	Rules     []Rule     `json:"rules,omitempty"`
	Budgets   []Budget   `json:"budgets,omitempty"`
	Runaway   []Runaway  `json:"runaway,omitempty"`
	Freshness *Freshness `json:"freshness,omitempty"`
	// Truncated counts tenant rules left out to keep the view within its
	// byte bound: those of the last tenants asked for (a caller lists its
	// tenants heaviest first). Never tier rules, budgets or runaway rules.
	Truncated int `json:"truncated,omitempty"`
}

// ViewFor returns the view of p for a process that reports tenants at
// now: p.Index(now).ViewFor(tenants, held, maxBytes). A collector keeps
// the Index for as long as it is Valid instead.
func (p Policy) ViewFor(tenants []string, held string, now time.Time, maxBytes int) (View, []byte, error) {
	x, err := p.Index(now)
	if err != nil {
		return View{}, nil, err
	}
	return x.ViewFor(tenants, held, maxBytes)
}

// Index is a policy compiled for views: its active rules by tenant, each
// tenant's and the shared part's JSON encoded once. Build one per policy
// version with Policy.Index and use it while Valid; ViewFor then costs a
// map lookup per tenant and the copy of the bytes it returns. Safe for
// concurrent use (read only).
type Index struct {
	version  uint64
	until    time.Time // the earliest expiry among the indexed parts
	shared   View      // tier rules, budgets, runaway, freshness
	sharedJS []byte    // `"rules":[…]` of the tier rules, then the rest's fields
	tierJS   []byte
	restJS   []byte
	tenants  map[string]tenantRules
	// created are the tenants with rules, by their newest rule's
	// Created, oldest first (ChangedSince).
	created []tenantCreated
}

type tenantCreated struct {
	at     time.Time
	tenant string
}

type tenantRules struct {
	rules []Rule
	js    []byte // the rules' JSON, comma-separated
}

// Index compiles p's rules active at now.
func (p Policy) Index(now time.Time) (*Index, error) {
	x := &Index{version: p.Version, tenants: make(map[string]tenantRules)}
	x.shared.Budgets, x.shared.Runaway = p.ActiveBudgets(now)
	x.shared.Freshness = p.Freshness
	soon := func(t time.Time) {
		if !t.IsZero() && (x.until.IsZero() || t.Before(x.until)) {
			x.until = t
		}
	}
	for _, b := range x.shared.Budgets {
		soon(b.Expires)
	}
	for _, r := range x.shared.Runaway {
		soon(r.Expires)
	}
	for _, r := range p.Active(now) {
		soon(r.Expires)
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("policy: view: %w", err)
		}
		if r.Tenant == "" {
			x.shared.Rules = append(x.shared.Rules, r)
			x.tierJS = appendItem(x.tierJS, b)
			continue
		}
		tr := x.tenants[r.Tenant]
		tr.rules = append(tr.rules, r)
		tr.js = appendItem(tr.js, b)
		x.tenants[r.Tenant] = tr
	}
	for t, tr := range x.tenants {
		var at time.Time
		for _, r := range tr.rules {
			if r.Created.After(at) {
				at = r.Created
			}
		}
		x.created = append(x.created, tenantCreated{at, t})
	}
	slices.SortFunc(x.created, func(a, b tenantCreated) int { return a.at.Compare(b.at) })
	rest, err := json.Marshal(View{Budgets: x.shared.Budgets, Runaway: x.shared.Runaway, Freshness: x.shared.Freshness})
	if err != nil {
		return nil, fmt.Errorf("policy: view: %w", err)
	}
	x.restJS = rest[len(`{"version":0,"tag":""`) : len(rest)-1] // `,"budgets":…` or empty
	return x, nil
}

func appendItem(dst, item []byte) []byte {
	if len(dst) > 0 {
		dst = append(dst, ',')
	}
	return append(dst, item...)
}

// Valid reports whether x still stands for a policy at version at now
// (no indexed part has expired since it was built).
func (x *Index) Valid(version uint64, now time.Time) bool {
	return x.version == version && (x.until.IsZero() || now.Before(x.until))
}

// ChangedSince appends to dst the tenants with a rule created after t
// (a rule without a creation time counts as old).
func (x *Index) ChangedSince(dst []string, t time.Time) []string {
	i, _ := slices.BinarySearchFunc(x.created, t, func(c tenantCreated, t time.Time) int {
		if c.at.After(t) {
			return 1
		}
		return -1
	})
	for _, c := range x.created[i:] {
		dst = append(dst, c.tenant)
	}
	return dst
}

// HasRules reports whether tenant has rules of its own in the index.
func (x *Index) HasRules(tenant string) bool {
	_, ok := x.tenants[tenant]
	return ok
}

// ViewFor returns the view for a process that reports tenants (heaviest
// first) and holds the view tagged held ("": none), and its JSON
// encoding, at most maxBytes (≤ 0: DefaultMaxViewBytes) — except that tier
// rules, budgets, runaway rules and freshness are never left out, so a
// policy whose shared part alone is larger gives a larger view.
func (x *Index) ViewFor(tenants []string, held string, maxBytes int) (View, []byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxViewBytes
	}
	v := View{Version: x.version, Budgets: x.shared.Budgets, Runaway: x.shared.Runaway, Freshness: x.shared.Freshness}
	v.Rules = append(v.Rules, x.shared.Rules...)
	h := fnv.New64a()
	h.Write(x.tierJS)
	h.Write(x.restJS)
	size := len(x.tierJS) + len(x.restJS) + 96 // braces, version, tag, truncated
	var seen map[string]bool
	var parts [][]byte
	for i, t := range tenants {
		tr, ok := x.tenants[t]
		if !ok || seen[t] {
			continue
		}
		if seen == nil {
			seen = make(map[string]bool, len(tenants)-i)
		}
		seen[t] = true
		if size+len(tr.js)+1 > maxBytes {
			v.Truncated += len(tr.rules)
			for _, rest := range tenants[i+1:] {
				if !seen[rest] {
					seen[rest] = true
					v.Truncated += len(x.tenants[rest].rules)
				}
			}
			break
		}
		size += len(tr.js) + 1
		v.Rules = append(v.Rules, tr.rules...)
		parts = append(parts, tr.js)
		h.Write([]byte{0})
		h.Write(tr.js)
	}
	fmt.Fprintf(h, "/%d", v.Truncated)
	v.Tag = strconv.FormatUint(h.Sum64(), 36)
	if held != "" && held == v.Tag {
		v = View{Version: x.version, Tag: v.Tag, Unchanged: true}
		b, err := json.Marshal(v)
		return v, b, err
	}
	b := make([]byte, 0, size)
	b = fmt.Appendf(b, `{"version":%d,"tag":%q`, x.version, v.Tag)
	if len(x.tierJS) > 0 || len(parts) > 0 {
		b = append(b, `,"rules":[`...)
		first := len(x.tierJS) == 0
		b = append(b, x.tierJS...)
		for _, p := range parts {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, p...)
		}
		b = append(b, ']')
	}
	b = append(b, x.restJS...)
	if v.Truncated > 0 {
		b = fmt.Appendf(b, `,"truncated":%d`, v.Truncated)
	}
	return v, append(b, '}'), nil
}

// Policy returns the policy a process applies from its view: the view's
// rules, budgets, runaway rules and freshness at its version (For, Quotas
// and ActiveBudgets work on it as on the whole policy for the tenants the
// view was made for). An Unchanged view has none: keep the one held.
func (v View) Policy() Policy {
	return Policy{Version: v.Version, Rules: v.Rules, Budgets: v.Budgets, Runaway: v.Runaway, Freshness: v.Freshness}
}
