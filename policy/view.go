package policy

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
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

// ViewFor returns the view of p for a process that reports tenants
// (heaviest first) and holds the view tagged held ("" : none), at now,
// and its JSON encoding, at most maxBytes (≤ 0: DefaultMaxViewBytes) —
// except that tier rules, budgets, runaway rules and freshness are never
// left out, so a policy whose shared part alone is larger gives a larger
// view. p must be valid (Validate).
func (p Policy) ViewFor(tenants []string, held string, now time.Time, maxBytes int) (View, []byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxViewBytes
	}
	want := make(map[string]int, len(tenants))
	for i, t := range tenants {
		if _, ok := want[t]; !ok {
			want[t] = i
		}
	}
	v := View{Freshness: p.Freshness}
	v.Budgets, v.Runaway = p.ActiveBudgets(now)
	var own [][]Rule // per tenant asked for, in the order asked
	own = make([][]Rule, len(tenants))
	for _, r := range p.Active(now) {
		switch i, ok := want[r.Tenant]; {
		case r.Tenant == "":
			v.Rules = append(v.Rules, r)
		case ok:
			own[i] = append(own[i], r)
		}
	}
	shared, err := json.Marshal(v)
	if err != nil {
		return View{}, nil, fmt.Errorf("policy: view: %w", err)
	}
	size := len(shared) + 64 // version, tag, truncated
	for i, rs := range own {
		n := 0
		for _, r := range rs {
			b, err := json.Marshal(r)
			if err != nil {
				return View{}, nil, fmt.Errorf("policy: view: %w", err)
			}
			n += len(b) + 1
		}
		if size+n > maxBytes {
			for _, rest := range own[i:] {
				v.Truncated += len(rest)
			}
			break
		}
		size += n
		v.Rules = append(v.Rules, rs...)
	}
	return v.seal(p.Version, held)
}

// seal sets the view's tag (a hash of its content), and empties it when
// the tag is the one held.
func (v View) seal(version uint64, held string) (View, []byte, error) {
	content, err := json.Marshal(v)
	if err != nil {
		return View{}, nil, fmt.Errorf("policy: view: %w", err)
	}
	h := fnv.New64a()
	h.Write(content)
	v.Tag = strconv.FormatUint(h.Sum64(), 36)
	v.Version = version
	if held != "" && held == v.Tag {
		v = View{Version: version, Tag: v.Tag, Unchanged: true}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return View{}, nil, fmt.Errorf("policy: view: %w", err)
	}
	return v, b, nil
}

// Policy returns the policy a process applies from its view: the view's
// rules, budgets, runaway rules and freshness at its version (For, Quotas
// and ActiveBudgets work on it as on the whole policy for the tenants the
// view was made for). An Unchanged view has none: keep the one held.
func (v View) Policy() Policy {
	return Policy{Version: v.Version, Rules: v.Rules, Budgets: v.Budgets, Runaway: v.Runaway, Freshness: v.Freshness}
}
