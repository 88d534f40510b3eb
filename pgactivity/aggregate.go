package pgactivity

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Limits of a Window.
const (
	// MaxLongest is the number of statements in Window.Longest.
	MaxLongest = 20
	// MaxBlocked caps the distinct pairs in Window.Blocked; pairs past it
	// are counted in Window.BlockedOmitted.
	MaxBlocked = 1000
)

// TenantLoad is one tenant's database load over a window.
type TenantLoad struct {
	Tenant string // "" for untagged sessions
	// AAS is the average number of active sessions: the sum over samples
	// of the tenant's active sessions, divided by the number of samples.
	AAS float64
	// Waits splits AAS by wait_event_type ("Lock", "IO", "LWLock", …),
	// with WaitCPU for active sessions waiting on nothing; its values add
	// up to AAS.
	Waits map[string]float64
	// Routes splits AAS by the route tag ("" for statements without one);
	// its values add up to AAS.
	Routes map[string]float64
	// Longest is the longest duration seen of one of its statements.
	Longest time.Duration
	// Statements counts the distinct statements (pid, query_start) seen
	// running; parallel workers are not counted apart from their leader.
	Statements int
	// Tier is the tier tag last seen on one of its statements, TierUnset
	// when none had one.
	Tier tenant.Tier
}

// BlockPair is a session waiting for a lock and one session it waits for.
// Blocking carries only PID when the blocker was not in the snapshot (an
// idle session holding an advisory lock, when idle sessions are left out).
type BlockPair struct {
	Blocked, Blocking Backend
}

// Window is what an Aggregator cut: the load over [Start, End).
type Window struct {
	Start, End time.Time
	Samples    int
	// Tenants by AAS, highest first (ties by name); untagged sessions
	// under Tenant "".
	Tenants []TenantLoad
	// Longest holds the MaxLongest longest-running statements seen in the
	// window, longest first, each as last seen (leaders, not their
	// parallel workers).
	Longest []Backend
	// Blocked holds each distinct blocked/blocking pair seen in the
	// window, as last seen, the longest-blocked first.
	Blocked        []BlockPair
	BlockedOmitted int
	// Hidden is the largest number of sessions hidden from the sampling
	// role in one sample (see ErrInsufficientPrivilege).
	Hidden int
}

// Aggregator adds snapshots over a window. Its memory is bounded by the
// number of distinct tenants and sessions seen in one window, not by its
// length. It is safe for concurrent use; the zero value is not usable:
// call NewAggregator.
type Aggregator struct {
	mu      sync.Mutex
	start   time.Time
	started bool
	samples int
	hidden  int
	tenants map[string]*tenantAcc
	// current statement per pid, as last seen; a statement ends (for
	// Longest) when its pid shows another query_start.
	current map[int32]Backend
	done    []Backend // top ended statements, at most MaxLongest
	pairs   map[pairKey]BlockPair
	omitted int
	byPID   map[int32]int              // scratch: snapshot index by pid
	key     func(tags *Backend) string // GroupBy; nil: by tenant
}

type tenantAcc struct {
	active     int
	waits      map[string]int
	routes     map[string]int
	longest    time.Duration
	statements int
	tier       tenant.Tier
}

type pairKey struct {
	blocked  int32
	start    int64
	blocking int32
}

// NewAggregator returns an empty aggregator; its first window starts at
// the first snapshot added (or at the first Cut).
func NewAggregator(opts ...AggregatorOption) *Aggregator {
	a := &Aggregator{
		tenants: map[string]*tenantAcc{},
		current: map[int32]Backend{},
		pairs:   map[pairKey]BlockPair{},
		byPID:   map[int32]int{},
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Add accounts one snapshot. AAS and waits do not depend on the order of
// the snapshots; statement counts and Longest assume time order (a
// session's statements are told apart by their query_start). The window
// keeps the backends it reports, sharing their Tags maps and BlockedBy
// slices with s: treat both as read-only once added.
func (a *Aggregator) Add(s Snapshot) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		a.start, a.started = s.Time, true
	}
	a.samples++
	a.hidden = max(a.hidden, s.Hidden)
	blocked := false
	if a.key != nil {
		a.index(s)
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		if len(b.BlockedBy) > 0 {
			blocked = true
		}
		if !b.Active() {
			continue
		}
		tags, name := b, b.Tenant
		if a.key != nil {
			tags = a.session(s, b)
			name = a.key(tags)
		}
		t := a.tenants[name]
		if t == nil {
			t = &tenantAcc{waits: map[string]int{}, routes: map[string]int{}}
			a.tenants[name] = t
		}
		t.active++
		t.waits[b.Wait()]++
		t.routes[tags.Route]++
		if tags.Tier != tenant.TierUnset {
			t.tier = tags.Tier
		}
		t.longest = max(t.longest, b.Duration)
		if b.LeaderPID != 0 {
			continue // a parallel worker: load, but its leader's statement
		}
		prev, seen := a.current[b.PID]
		switch {
		case !seen:
			t.statements++
		case !prev.QueryStart.Equal(b.QueryStart):
			t.statements++
			a.ended(prev)
		case prev.Duration > b.Duration: // an older observation arrived late
			continue
		}
		a.current[b.PID] = *b
	}
	if blocked {
		a.addPairs(s)
	}
}

// ended keeps a finished statement if it is among the MaxLongest longest.
func (a *Aggregator) ended(b Backend) {
	if len(a.done) < MaxLongest {
		a.done = append(a.done, b)
		return
	}
	m := 0
	for i := range a.done {
		if a.done[i].Duration < a.done[m].Duration {
			m = i
		}
	}
	if b.Duration > a.done[m].Duration {
		a.done[m] = b
	}
}

func (a *Aggregator) addPairs(s Snapshot) {
	a.index(s)
	for i := range s.Backends {
		b := &s.Backends[i]
		for _, pid := range b.BlockedBy {
			k := pairKey{blocked: b.PID, start: b.QueryStart.UnixNano(), blocking: pid}
			if _, ok := a.pairs[k]; !ok && len(a.pairs) >= MaxBlocked {
				a.omitted++
				continue
			}
			p := BlockPair{Blocked: *b, Blocking: Backend{PID: pid}}
			if j, ok := a.byPID[pid]; ok {
				p.Blocking = s.Backends[j]
			}
			a.pairs[k] = p
		}
	}
}

// Cut returns the window from the previous cut (or the first snapshot) to
// now, and starts the next one at now.
func (a *Aggregator) Cut(now time.Time) Window {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := Window{Start: a.start, End: now, Samples: a.samples, Hidden: a.hidden, BlockedOmitted: a.omitted}
	if !a.started {
		w.Start = now
	}
	if a.samples > 0 {
		n := float64(a.samples)
		w.Tenants = make([]TenantLoad, 0, len(a.tenants))
		for name, t := range a.tenants {
			l := TenantLoad{Tenant: name, AAS: float64(t.active) / n, Waits: make(map[string]float64, len(t.waits)),
				Routes: make(map[string]float64, len(t.routes)), Longest: t.longest, Statements: t.statements, Tier: t.tier}
			for k, v := range t.waits {
				l.Waits[k] = float64(v) / n
			}
			for k, v := range t.routes {
				l.Routes[k] = float64(v) / n
			}
			w.Tenants = append(w.Tenants, l)
		}
		slices.SortFunc(w.Tenants, func(x, y TenantLoad) int {
			if x.AAS != y.AAS {
				if x.AAS > y.AAS {
					return -1
				}
				return 1
			}
			return strings.Compare(x.Tenant, y.Tenant)
		})
	}
	w.Longest = a.longest()
	if len(a.pairs) > 0 {
		w.Blocked = make([]BlockPair, 0, len(a.pairs))
		for _, p := range a.pairs {
			w.Blocked = append(w.Blocked, p)
		}
		slices.SortFunc(w.Blocked, func(x, y BlockPair) int {
			if c := compareDuration(x.Blocked, y.Blocked); c != 0 {
				return c
			}
			if x.Blocking.PID != y.Blocking.PID {
				return int(x.Blocking.PID) - int(y.Blocking.PID)
			}
			return 0
		})
	}

	a.start, a.started = now, true
	a.samples, a.hidden, a.omitted = 0, 0, 0
	clear(a.tenants)
	clear(a.current)
	clear(a.pairs)
	a.done = a.done[:0]
	return w
}

func (a *Aggregator) longest() []Backend {
	all := make([]Backend, 0, len(a.done)+len(a.current))
	all = append(all, a.done...)
	for _, b := range a.current {
		all = append(all, b)
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortFunc(all, compareDuration)
	return slices.Clip(all[:min(len(all), MaxLongest)])
}

// compareDuration orders backends longest first, then by pid and start, so
// windows come out the same for the same input.
func compareDuration(x, y Backend) int {
	switch {
	case x.Duration > y.Duration:
		return -1
	case x.Duration < y.Duration:
		return 1
	case x.PID != y.PID:
		return int(x.PID) - int(y.PID)
	}
	return x.QueryStart.Compare(y.QueryStart)
}
