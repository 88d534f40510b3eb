package enforcesim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/policy"
)

// FreshnessConfig is a population of app users whose account data changes
// as a Poisson process, and who make GETs for four causes:
//
//   - a push notification arrives (Poisson, PushesPerDay) and the app
//     fetches in the background (push-notification);
//   - the user opens the app (Poisson, OpensPerDay): one GET at once
//     (app-open), EarlyReloads more from screens that load in the first
//     EarlyWithin (generic-reload), about InteractivePerSession GETs the
//     user asks for (interactive), and a periodic refresh every ReloadEvery
//     while the session lasts (generic-reload; exponential, SessionMean).
//
// Every GET returns the account's current data and becomes the client's
// copy. A rule's share is the GETs it matches over all GETs after the
// first (warm-up) day; its precision is the share of those whose data had
// not changed since the client's copy was computed.
type FreshnessConfig struct {
	Users int
	Days  int
	Seed  uint64
	// ChangesPerDay is the rate of each account's data changes; 0:
	// calibrate it so that the first rule's precision is TargetPrecision.
	ChangesPerDay float64
	// PushesPerDay is each user's rate of pushes; 0: calibrate it so that
	// the first rule's share is TargetShare.
	PushesPerDay          float64
	OpensPerDay           float64
	SessionMean           time.Duration
	EarlyReloads          int
	EarlyWithin           time.Duration
	InteractivePerSession float64
	ReloadEvery           time.Duration
	// SessionChanges is the share of sessions in which the user changes
	// the data in the first EarlyWithin (a payment or a transfer made in
	// the app), on top of the Poisson changes; default 0.
	SessionChanges  float64
	Rules           []policy.FreshnessRule
	TargetShare     float64
	TargetPrecision float64
}

// DefaultFreshness is 1,000 users over 12 days, five app opens a day of
// 90 s on average, one early reload, three interactive GETs and a refresh
// every minute, Monzo's three rules, calibrated on Monzo's first row
// (push-triggered within 24 h: 20% of GETs, 80% precision).
func DefaultFreshness() FreshnessConfig {
	return FreshnessConfig{Users: 1000, Days: 12, Seed: 18, OpensPerDay: 5, SessionMean: 90 * time.Second,
		EarlyReloads: 1, EarlyWithin: 8 * time.Second, InteractivePerSession: 3, ReloadEvery: time.Minute,
		Rules: policy.MonzoRules(), TargetShare: 0.20, TargetPrecision: 0.80}
}

// TraceRequest is one GET of a trace. AppAge is -1 outside a session (a
// background push fetch sends no app age).
type TraceRequest struct {
	At     time.Duration
	User   int32
	Cause  policy.Cause
	AppAge time.Duration
}

// Trace is a sequence of GETs by time, and each user's data changes.
type Trace struct {
	Requests []TraceRequest
	Changes  [][]time.Duration
	Horizon  time.Duration
}

// Version returns the version of user u's data at t: the changes at or
// before t.
func (tr *Trace) Version(u int32, t time.Duration) int { return version(tr.Changes[u], t) }

func version(c []time.Duration, t time.Duration) int {
	return sort.Search(len(c), func(i int) bool { return c[i] > t })
}

func expDur(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}

// poisson draws a Poisson count of mean m (Knuth's method; m is small).
func poisson(r *rand.Rand, m float64) int {
	l, k, p := math.Exp(-m), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// userRequests appends the GETs of user u, in time order, to out, and
// the changes the user makes in sessions to *changes.
func (c FreshnessConfig) userRequests(r *rand.Rand, u int32, out []TraceRequest, changes *[]time.Duration) []TraceRequest {
	horizon := time.Duration(c.Days) * 24 * time.Hour
	day := float64(24 * time.Hour)
	from := len(out)
	if c.PushesPerDay > 0 {
		for t := time.Duration(r.ExpFloat64() * day / c.PushesPerDay); t < horizon; t += time.Duration(r.ExpFloat64() * day / c.PushesPerDay) {
			out = append(out, TraceRequest{At: t, User: u, Cause: policy.CausePush, AppAge: -1})
		}
	}
	for t := time.Duration(r.ExpFloat64() * day / c.OpensPerDay); t < horizon; t += time.Duration(r.ExpFloat64() * day / c.OpensPerDay) {
		length := expDur(r, c.SessionMean)
		out = append(out, TraceRequest{At: t, User: u, Cause: policy.CauseAppOpen, AppAge: 0})
		if c.SessionChanges > 0 && r.Float64() < c.SessionChanges {
			*changes = append(*changes, t+time.Duration(r.Float64()*float64(c.EarlyWithin)))
		}
		for range c.EarlyReloads {
			a := time.Duration(r.Float64() * float64(c.EarlyWithin))
			out = append(out, TraceRequest{At: t + a, User: u, Cause: policy.CauseReload, AppAge: a})
		}
		for range poisson(r, c.InteractivePerSession) {
			a := time.Duration(r.Float64() * float64(max(length, c.EarlyWithin)))
			out = append(out, TraceRequest{At: t + a, User: u, Cause: policy.CauseInteractive, AppAge: a})
		}
		for a := c.ReloadEvery; a < length; a += c.ReloadEvery {
			out = append(out, TraceRequest{At: t + a, User: u, Cause: policy.CauseReload, AppAge: a})
		}
	}
	mine := out[from:]
	sort.Slice(mine, func(i, j int) bool { return mine[i].At < mine[j].At })
	return out
}

// forUsers calls fn with each user's GETs in time order and the changes
// made in sessions (both slices are reused between calls).
func (c FreshnessConfig) forUsers(fn func(u int32, reqs []TraceRequest, sessionChanges []time.Duration)) {
	r := rand.New(rand.NewPCG(c.Seed, 1))
	var buf []TraceRequest
	var ch []time.Duration
	for u := range int32(c.Users) {
		ch = ch[:0]
		buf = c.userRequests(r, u, buf[:0], &ch)
		fn(u, buf, ch)
	}
}

// merged returns the sorted union of the Poisson changes and those made in
// sessions.
func merged(poisson, session []time.Duration) []time.Duration {
	if len(session) == 0 {
		return poisson
	}
	out := append(slices.Clone(poisson), session...)
	slices.Sort(out)
	return out
}

// changes draws each user's Poisson data changes at perDay.
func (c FreshnessConfig) changes(perDay float64) [][]time.Duration {
	r := rand.New(rand.NewPCG(c.Seed, 2))
	horizon := time.Duration(c.Days) * 24 * time.Hour
	day := float64(24 * time.Hour)
	out := make([][]time.Duration, c.Users)
	for u := range out {
		if perDay <= 0 {
			continue
		}
		for t := time.Duration(r.ExpFloat64() * day / perDay); t < horizon; t += time.Duration(r.ExpFloat64() * day / perDay) {
			out[u] = append(out[u], t)
		}
	}
	return out
}

// matchedAges returns, per rule, the copy ages of the GETs it matches
// (first matching rule wins), and the GETs counted.
func (c FreshnessConfig) matchedAges() ([][]time.Duration, int) {
	ages := make([][]time.Duration, len(c.Rules))
	gets := 0
	c.forUsers(func(_ int32, reqs []TraceRequest, _ []time.Duration) {
		copyAt := time.Duration(-1)
		for _, q := range reqs {
			prev := copyAt
			copyAt = q.At
			if q.At < 24*time.Hour {
				continue // warm-up day
			}
			gets++
			if prev < 0 {
				continue
			}
			if i := c.match(q, q.At-prev); i >= 0 {
				ages[i] = append(ages[i], q.At-prev)
			}
		}
	})
	return ages, gets
}

// match returns the first rule matching q with a copy of age, or -1.
func (c FreshnessConfig) match(q TraceRequest, age time.Duration) int {
	if !q.Cause.Sheddable() {
		return -1
	}
	for i, rule := range c.Rules {
		if freshness.Matches(rule, q.Cause, age, q.AppAge, q.AppAge >= 0) {
			return i
		}
	}
	return -1
}

// FreshnessRow is one rule of the result, beside Monzo's published figure
// (0 where Monzo published none).
type FreshnessRow struct {
	Rule                       string
	Share, Precision           float64
	MonzoShare, MonzoPrecision float64
}

// FreshnessResult is the calibrated model and what it gives.
type FreshnessResult struct {
	ChangesPerDay, PushesPerDay float64
	GETs                        int
	Rows                        []FreshnessRow
	// Config is the configuration with the calibrated rates filled in.
	Config FreshnessConfig
}

// Monzo's published figures, in the order of policy.MonzoRules, then all three.
var monzoFigures = [][2]float64{{0.20, 0.80}, {0.20, 0.95}, {0.07, 0.95}, {0.50, 0.90}}

// Freshness calibrates the model (pushes for the first rule's share, then
// the change rate for its precision, from the exact Poisson expectation
// exp(−rate × age)), draws the data changes and measures every rule on the
// trace.
func Freshness(c FreshnessConfig) (FreshnessResult, error) {
	if c.Users < 1 || c.Days < 2 || c.OpensPerDay <= 0 || c.SessionMean <= 0 || c.ReloadEvery <= 0 || len(c.Rules) == 0 {
		return FreshnessResult{}, fmt.Errorf("sim: freshness config %+v", c)
	}
	if c.PushesPerDay == 0 {
		// On a quarter of the users: the share is a mean over them all.
		lo, hi := 0.01, 100.0
		for range 10 {
			mid := math.Sqrt(lo * hi)
			cc := c
			cc.Users = max(c.Users/4, 1)
			cc.PushesPerDay = mid
			ages, gets := cc.matchedAges()
			if float64(len(ages[0]))/float64(gets) < c.TargetShare {
				lo = mid
			} else {
				hi = mid
			}
		}
		c.PushesPerDay = math.Sqrt(lo * hi)
	}
	ages, gets := c.matchedAges()
	if c.ChangesPerDay == 0 {
		expect := func(perDay float64) float64 {
			s := 0.0
			for _, a := range ages[0] {
				s += math.Exp(-perDay * a.Hours() / 24)
			}
			return s / float64(len(ages[0]))
		}
		lo, hi := 1e-4, 1e3
		for range 60 {
			mid := math.Sqrt(lo * hi)
			if expect(mid) > c.TargetPrecision {
				lo = mid
			} else {
				hi = mid
			}
		}
		c.ChangesPerDay = math.Sqrt(lo * hi)
	}
	changes := c.changes(c.ChangesPerDay)
	res := FreshnessResult{ChangesPerDay: c.ChangesPerDay, PushesPerDay: c.PushesPerDay, GETs: gets, Config: c}
	right := make([]int, len(c.Rules))
	c.forUsers(func(u int32, reqs []TraceRequest, session []time.Duration) {
		cs := merged(changes[u], session)
		copyAt := time.Duration(-1)
		for _, q := range reqs {
			prev := copyAt
			copyAt = q.At
			if q.At < 24*time.Hour || prev < 0 {
				continue
			}
			if i := c.match(q, q.At-prev); i >= 0 && version(cs, q.At) == version(cs, prev) {
				right[i]++
			}
		}
	})
	var allM, allR int
	for i, rule := range c.Rules {
		row := FreshnessRow{Rule: rule.ID}
		if n := len(ages[i]); n > 0 {
			row.Share, row.Precision = float64(n)/float64(gets), float64(right[i])/float64(n)
		}
		if i < 3 {
			row.MonzoShare, row.MonzoPrecision = monzoFigures[i][0], monzoFigures[i][1]
		}
		allM += len(ages[i])
		allR += right[i]
		res.Rows = append(res.Rows, row)
	}
	all := FreshnessRow{Rule: "all rules", MonzoShare: monzoFigures[3][0], MonzoPrecision: monzoFigures[3][1]}
	if allM > 0 {
		all.Share, all.Precision = float64(allM)/float64(gets), float64(allR)/float64(allM)
	}
	res.Rows = append(res.Rows, all)
	return res, nil
}

// WriteFreshness writes the model's table beside Monzo's figures.
func WriteFreshness(w io.Writer, r FreshnessResult) {
	fmt.Fprintln(w, "| rule | Monzo: share of traffic | Monzo: precision | model: share of GETs | model: precision |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, row := range r.Rows {
		ms, mp := "-", "-"
		if row.MonzoShare > 0 {
			ms, mp = pct(row.MonzoShare), pct(row.MonzoPrecision)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row.Rule, ms, mp, pct(row.Share), pct(row.Precision))
	}
	fmt.Fprintf(w, "\ncalibrated: %.2f data changes and %.2f pushes per user per day; %d GETs\n", r.ChangesPerDay, r.PushesPerDay, r.GETs)
}

// Trace returns the GETs of users [0, users) of the configuration (with
// its rates set, e.g. FreshnessResult.Config) in time order over the
// first span of the horizon, and their data changes, for replaying
// through a real service.
func (c FreshnessConfig) Trace(users int, span time.Duration) Trace {
	users = min(users, c.Users)
	changes := c.changes(c.ChangesPerDay)[:users]
	tr := Trace{Horizon: span, Changes: make([][]time.Duration, users)}
	c.forUsers(func(u int32, reqs []TraceRequest, session []time.Duration) {
		if int(u) >= users {
			return
		}
		cs := merged(changes[u], session)
		tr.Changes[u] = slices.Clone(cs[:sort.Search(len(cs), func(i int) bool { return cs[i] >= span })])
		for _, q := range reqs {
			if q.At < span {
				tr.Requests = append(tr.Requests, q)
			}
		}
	})
	sort.SliceStable(tr.Requests, func(i, j int) bool { return tr.Requests[i].At < tr.Requests[j].At })
	return tr
}
