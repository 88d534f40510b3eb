package sqlcomment

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/gcra"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// Defaults of a Budgets.
const (
	// DefaultMaxKeys bounds the buckets of one "each" budget.
	DefaultMaxKeys = 10000
	// DefaultColdStart is the estimate of a statement whose shape has no
	// history yet (see Budgets).
	DefaultColdStart = 10 * time.Millisecond
	// maxApply is how many budgets apply to one statement (the first ones
	// that match, in policy order); more are counted as overflow.
	maxApply = 4
	// keyShapes and budgetShapes are the shapes whose durations a bucket
	// and a budget remember.
	keyShapes    = 8
	budgetShapes = 32
	// evictSample is how many keys an eviction looks at.
	evictSample = 16
)

// Budgets holds the database budgets and runaway rules that a Commenter
// (WithBudgets) applies before a statement leaves the process, and their
// state: the buckets, the measured durations, the runaway watch list. Set
// replaces the budgets and rules live (from the collector's policy, with
// SetPolicy as an ingest policy handler) and keeps the state of the
// budgets whose id stays. It is safe for concurrent use; make one per
// process and share it between the wrapped handles.
//
// # Matching
//
// A budget's Match is a list of alternatives (OR), each a set of tags that
// must all be equal (AND): tenant, route and tier come from the
// statement's context (tenant.Tags), application, db_driver and any other
// key from the wrapper's static tags (WithApplication, WithTag). An empty
// Match matches every statement. Each, when set, gives every distinct
// value of that tag a bucket of its own (statements without the tag share
// the bucket of the empty value); a Budgets keeps at most MaxKeys
// buckets per budget (WithMaxKeys). When a new value would exceed it, the
// bucket used longest ago among 16 sampled that has no statement in flight
// is forgotten (its debt and its durations with it: an approximate LRU);
// when every sampled one is busy, the new value shares a single overflow
// bucket of the budget, so memory stays bounded under any cardinality.
//
// # Estimates
//
// A statement's cost is estimated before it is sent from measured history,
// with no EXPLAIN round trip: the moving average (weight 1/4 once four are
// known) of the durations of the same statement shape (Shape: the text
// without literals nor comment) under the same bucket. The cold start: a
// shape not yet measured under the bucket takes its average under the
// budget's other buckets, else the bucket's average over all its shapes,
// else the cold-start estimate (the budget's cold_start_seconds, else
// DefaultColdStart or WithColdStart). A bucket remembers 8 shapes and a
// budget 32; a new shape replaces the one measured least often.
//
// # Limits and modes
//
// Share is database time per second, refilled continuously up to the
// capacity; a statement takes its estimate up front and, when done, the
// difference from its measured duration (so the bucket may go into debt,
// which is remembered). A statement is over the share when the bucket holds
// less than its estimate (at most the capacity). It is over the
// per-statement cap when its estimate alone exceeds it, and over the
// concurrency when as many statements of its bucket are in flight (in this
// process, or in the fleet with SetFleetLimiter). In
// Enforce mode such a statement is not sent: the caller gets a
// *BudgetError (errors.Is(err, ErrBudget)) with the budget, the limit and a
// retry-after. In Warn mode (the default) it is sent, counted and logged
// (at most one log line per budget per second, with the count). Off
// budgets do nothing.
//
// # Transactions
//
// A statement inside an open transaction is never refused: refusing the
// third statement of five would leave the caller with a transaction it
// must roll back without having asked to. The budgets are checked when
// the transaction begins instead (database/sql BeginTx, pgxcomment
// DB.Begin): in Enforce mode a begin is refused (ErrBudget) while a
// matching bucket is spent (share at or below zero) or full (concurrency).
// Statements inside it are charged and counted in flight as usual; their
// violations count as "in_tx" and are logged, never refused. A
// transaction opened with a BEGIN statement text is not seen as one. A
// runaway rule's deadline does apply inside a transaction: the statement
// fails with a *RunawayError (see Runaway rules), and the transaction
// must then be rolled back, as after any statement timeout; the
// cool-down's refusals do not apply inside a transaction.
//
// # Runaway rules
//
// A runaway rule (policy.Runaway) applies to statements that match it:
// with Action cancel or terminate the statement runs under a context
// deadline of AfterSeconds (the driver cancels it on the server when it
// expires); with report it runs as is and is reported when it ends after
// AfterSeconds. A statement that the rule's deadline ends fails with the
// driver's error wrapped in a *RunawayError that names the rule, wherever
// the driver reports it (Exec, Query, rows.Next and rows.Err, Row.Scan):
//
//	sqlcomment: cancelled by runaway rule "long-reports" after 2s: timeout: context deadline exceeded
//
// errors.Is(err, context.DeadlineExceeded) and errors.Is(err, ErrRunaway)
// hold, and errors.As reaches the driver's error. A statement that the
// caller's own deadline or cancel ended first gets the driver's error as
// it is. Either way, with a cool-down the statement's shape goes on
// the rule's watch list for CooldownSeconds, during which a cancel or
// terminate rule refuses statements of that shape that match it
// (LimitWatch), and a report rule only counts them. The watch list holds at
// most 4,096 entries; a new one then replaces the one expiring soonest.
type Budgets struct {
	cfg budgetConfig
	cur atomic.Pointer[budgetSet]

	mu     sync.Mutex // guards states, rules (the states kept by id) and the watch list
	states map[string]*budgetState
	rstats map[string]*ruleStats
	watch  map[watchKey]int64 // expiry, unix ns
	nwatch atomic.Int32

	ev     events
	shapes shapeCache
	fleet  atomic.Pointer[fleetHolder] // fleetlimit.go
}

// A BudgetOption configures a Budgets.
type BudgetOption func(*budgetConfig)

type budgetConfig struct {
	maxKeys   int
	coldStart float64 // seconds
	log       *slog.Logger
}

// WithMaxKeys bounds the buckets of each "each" budget (default
// DefaultMaxKeys; values below 1 are raised to 1).
func WithMaxKeys(n int) BudgetOption { return func(c *budgetConfig) { c.maxKeys = n } }

// WithColdStart sets the estimate of a statement with no history (default
// DefaultColdStart; negative values are taken as 0).
func WithColdStart(d time.Duration) BudgetOption {
	return func(c *budgetConfig) { c.coldStart = d.Seconds() }
}

// WithBudgetLogger logs violations and runaway actions to l (default: not
// logged; they are still counted and kept in Events).
func WithBudgetLogger(l *slog.Logger) BudgetOption { return func(c *budgetConfig) { c.log = l } }

// NewBudgets returns an empty Budgets: it admits everything until Set.
func NewBudgets(opts ...BudgetOption) *Budgets {
	c := budgetConfig{maxKeys: DefaultMaxKeys, coldStart: DefaultColdStart.Seconds()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.maxKeys < 1 {
		c.maxKeys = 1
	}
	if c.coldStart < 0 {
		c.coldStart = 0
	}
	b := &Budgets{cfg: c, states: map[string]*budgetState{}, rstats: map[string]*ruleStats{},
		watch: map[watchKey]int64{}}
	b.cur.Store(&budgetSet{})
	return b
}

// SetPolicy applies the budgets and runaway rules of p that are active at
// now; use it from ingest's policy handler so that the collector's policy
// reaches every process. It returns the error of p.ValidateBudgets and then
// keeps the budgets it had.
func (b *Budgets) SetPolicy(p policy.Policy, now time.Time) error {
	if err := p.ValidateBudgets(); err != nil {
		return err
	}
	bs, rs := p.ActiveBudgets(now)
	return b.setAt(now, bs, rs)
}

// Set replaces the budgets and runaway rules. Budgets whose id stays keep
// their buckets and history (unless their Each changed); statements in
// flight finish against the state they started with. When a kept budget's
// share or capacity changes, its buckets keep the database time they hold
// (or owe) and repay a debt at the new share: raising the share of a
// tenant in debt lets it back in as much sooner.
func (b *Budgets) Set(budgets []policy.Budget, rules []policy.Runaway) error {
	return b.setAt(time.Now(), budgets, rules)
}

// setAt is Set at now (the instant a changed share takes effect).
func (b *Budgets) setAt(now time.Time, budgets []policy.Budget, rules []policy.Runaway) error {
	p := policy.Policy{Budgets: budgets, Runaway: rules}
	if err := p.ValidateBudgets(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &budgetSet{byTenant: map[string][]*budget{}}
	keep := map[string]*budgetState{}
	for _, pb := range budgets {
		st := b.states[pb.ID]
		if st == nil || st.each != pb.Each {
			st = newBudgetState(pb.Each, b.cfg.maxKeys)
		}
		keep[pb.ID] = st
		if pb.ModeOrDefault() == policy.Off {
			continue
		}
		bu := compileBudget(pb, st)
		st.rerate(now, bu)
		s.all = append(s.all, bu)
		if ts, ok := tenantsOf(bu.alts); ok {
			for _, t := range ts {
				s.byTenant[t] = append(s.byTenant[t], bu)
			}
		} else {
			s.general = append(s.general, bu)
		}
	}
	b.states = keep
	rkeep := map[string]*ruleStats{}
	for _, pr := range rules {
		rs := b.rstats[pr.ID]
		if rs == nil {
			rs = &ruleStats{}
		}
		rkeep[pr.ID] = rs
		r := &rule{
			id: pr.ID, alts: compileMatch(pr.Match), after: time.Duration(pr.AfterSeconds * float64(time.Second)),
			action: pr.Action, cooldown: time.Duration(pr.CooldownSeconds * float64(time.Second)), stats: rs,
		}
		if !pr.Expires.IsZero() {
			r.expires = pr.Expires.UnixNano()
		}
		s.rules = append(s.rules, r)
	}
	b.rstats = rkeep
	for k := range b.watch {
		if _, ok := rkeep[k.rule]; !ok {
			delete(b.watch, k)
		}
	}
	b.nwatch.Store(int32(len(b.watch)))
	b.cur.Store(s)
	return nil
}

// budgetSet is one compiled version of the budgets and rules; it is never
// changed once stored.
type budgetSet struct {
	all      []*budget
	general  []*budget            // budgets not indexed by tenant
	byTenant map[string][]*budget // budgets whose every alternative names a tenant
	rules    []*rule
}

// alt is one alternative of a match: the conditions that must all hold.
type alt struct {
	tenant, route, tier string // "" = any
	static              []pair // other keys, against the wrapper's static tags
}

func compileMatch(m []map[string]string) []alt {
	out := make([]alt, 0, len(m))
	for _, a := range m {
		var c alt
		for _, kv := range sortedPairs(a) {
			k, v := kv.k, kv.v
			switch k {
			case KeyTenant:
				c.tenant = v
			case KeyRoute:
				c.route = v
			case KeyTier:
				c.tier = v
			default:
				c.static = append(c.static, pair{k, v})
			}
		}
		out = append(out, c)
	}
	return out
}

// tenantsOf returns the tenants of alts when every alternative names one.
func tenantsOf(alts []alt) ([]string, bool) {
	if len(alts) == 0 {
		return nil, false
	}
	var ts []string
	for _, a := range alts {
		if a.tenant == "" {
			return nil, false
		}
		dup := false
		for _, t := range ts {
			dup = dup || t == a.tenant
		}
		if !dup {
			ts = append(ts, a.tenant)
		}
	}
	return ts, true
}

// matches reports whether a statement with tags t, sent by a Commenter with
// configuration cfg, matches alts (empty: everything).
func matches(alts []alt, t *tenant.Tags, cfg *config) bool {
	if len(alts) == 0 {
		return true
	}
	for i := range alts {
		a := &alts[i]
		if (a.tenant == "" || a.tenant == t.Tenant) && (a.route == "" || a.route == t.Route) &&
			(a.tier == "" || a.tier == t.Tier.String()) && staticMatch(a.static, cfg) {
			return true
		}
	}
	return false
}

func staticMatch(ps []pair, cfg *config) bool {
	for _, p := range ps {
		if staticTag(cfg, p.k) != p.v {
			return false
		}
	}
	return true
}

// staticTag returns the value of a static tag of cfg ("" when not set).
func staticTag(cfg *config, k string) string {
	if cfg == nil {
		return ""
	}
	switch k {
	case KeyApplication:
		return cfg.application
	case KeyDBDriver:
		return cfg.dbDriver
	}
	for _, p := range cfg.static {
		if p.k == k {
			return p.v
		}
	}
	return ""
}

// tagValue returns the value of tag k of a statement.
func tagValue(k string, t *tenant.Tags, cfg *config) string {
	switch k {
	case KeyTenant:
		return t.Tenant
	case KeyRoute:
		return t.Route
	case KeyTier:
		return t.Tier.String()
	}
	return staticTag(cfg, k)
}

// budget is a compiled policy.Budget.
type budget struct {
	id       string
	alts     []alt
	each     string
	enforce  bool
	share    float64   // seconds per second
	capacity float64   // seconds
	rate     gcra.Rate // share and capacity, when there is a share
	perStmt  float64   // seconds; 0: none
	conc     int32     // 0: none
	expires  int64     // unix ns; 0: never
	cold     float64   // seconds; < 0: the Budgets' cold start
	st       *budgetState
	lastLog  atomic.Int64
	logged   atomic.Uint64 // violations when last logged
}

func compileBudget(pb policy.Budget, st *budgetState) *budget {
	bu := &budget{id: pb.ID, alts: compileMatch(pb.Match), each: pb.Each,
		enforce: pb.ModeOrDefault() == policy.Enforce, share: pb.Share, capacity: pb.CapacitySeconds,
		perStmt: pb.MaxStatementSeconds, conc: int32(pb.Concurrency), st: st}
	if !pb.Expires.IsZero() {
		bu.expires = pb.Expires.UnixNano()
	}
	bu.cold = -1
	if pb.ColdStartSeconds > 0 {
		bu.cold = pb.ColdStartSeconds
	}
	if bu.share > 0 && bu.capacity == 0 {
		bu.capacity = bu.share // one second's worth
	}
	if bu.share > 0 {
		r, err := gcra.NewRate(bu.share, bu.capacity)
		if err != nil { // a share too small to refill: nothing is ever banked
			r, _ = gcra.NewRate(1e-9, 0)
		}
		bu.rate = r
	}
	return bu
}

// coldStart is the estimate of a statement with no history under bu: its
// cold_start_seconds, else def (the Budgets').
func (bu *budget) coldStart(def float64) float64 {
	if bu.cold >= 0 {
		return bu.cold
	}
	return def
}

// Ticket is the admission of one statement: the buckets it was charged to
// and its estimates, which Finish corrects with the measured duration. It
// is a value, so admitting a statement does not allocate. The zero Ticket
// is a statement no budget matched.
type Ticket struct {
	n     uint8
	inTx  bool
	slots [maxApply]slot
	shape uint64
	rule  *rule
	start time.Time
}

type slot struct {
	b     *budget
	k     *bucket
	est   float64
	fleet string // the FleetLimiter key of a slot taken there ("": none)
}

// Runaway returns the deadline that the runaway rule matched by the
// statement sets (0: none; report rules set none).
func (t *Ticket) Runaway() time.Duration {
	if t.rule == nil || t.rule.action == policy.Report {
		return 0
	}
	return t.rule.after
}
