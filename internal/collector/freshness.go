package collector

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// Freshness: the collector merges the freshness sections of reports
// (samples of GETs of sampled callers, per-rule counters) into
//
//   - per route, hourly counts of sampled GETs and of those that repeated
//     the same caller's previous response on the route within the repeat
//     window (24 h), from the last response kept per (route, caller);
//   - per route and per rule × route, minute counters over the live
//     window (10 min), for qtop.
//
// This state is in memory, bounded, and rebuilt from the write-ahead log
// after a restart as far as the log reaches.
const (
	RepeatWindow      = 24 * time.Hour
	freshLiveMinutes  = 10
	maxFreshKeys      = 200_000
	maxFreshRoutes    = 256
	maxFreshRuleCells = 1024
	freshSweepEvery   = time.Minute
)

type freshKey struct {
	route  string
	caller uint64
}

type freshLast struct {
	at   int64
	resp uint64
}

type hourSlot struct {
	hour             int64
	samples, repeats uint64
}

type freshMinute struct {
	minute                int64
	requests, revalidated uint64
}

type ruleMinute struct {
	minute                        int64
	matched, served, right, wrong uint64
}

type freshRouteState struct {
	hours [25]hourSlot
	live  [freshLiveMinutes]freshMinute
}

type ruleKey struct{ rule, route string }

// freshPart is the freshness feature: it merges the freshness section of
// reports into freshState and serves the freshness view. Its lock guards
// the state.
type freshPart struct {
	pol *policyPart
	now func() time.Time

	mu    sync.Mutex
	state *freshState // nil until a report has a freshness section
}

var _ feature = (*freshPart)(nil)

func (f *freshPart) reply(_ *report.Report, _ time.Time, reply report.Reply, _ bool) report.Reply {
	return reply
}
func (f *freshPart) snapshot(*api.Snapshot, time.Time) {}
func (f *freshPart) tick(context.Context, time.Time)   {}

type freshState struct {
	last      map[freshKey]freshLast
	routes    map[string]*freshRouteState
	rules     map[ruleKey]*[freshLiveMinutes]ruleMinute
	untracked uint64
	dropped   uint64
	nextSweep int64
}

func newFreshState() *freshState {
	return &freshState{last: make(map[freshKey]freshLast), routes: make(map[string]*freshRouteState),
		rules: make(map[ruleKey]*[freshLiveMinutes]ruleMinute)}
}

// route returns the state of route, folding routes beyond the bound (or
// not valid) into "other"; the returned name is the map's own copy.
func (f *freshState) route(name string) (string, *freshRouteState) {
	if name == "" || len(name) > 256 || strings.ContainsAny(name, "\x00\n\r") {
		name = report.OtherRoute
	}
	if r, ok := f.routes[name]; ok {
		return name, r
	}
	if len(f.routes) >= maxFreshRoutes {
		name = report.OtherRoute
		if r, ok := f.routes[name]; ok {
			return name, r
		}
	}
	name = strings.Clone(name)
	r := &freshRouteState{}
	f.routes[name] = r
	return name, r
}

// sweep forgets last responses older than the repeat window.
func (f *freshState) sweep(now int64) {
	cut := now - int64(RepeatWindow)
	for k, v := range f.last {
		if v.at < cut {
			delete(f.last, k)
		}
	}
	f.nextSweep = now + int64(freshSweepEvery)
}

// sample merges one sampled GET.
func (f *freshState) sample(s freshness.Sample, now int64) {
	at := s.At.UnixNano()
	if at > now+int64(time.Minute) || at < now-int64(RepeatWindow) {
		return // from the future (skew beyond a minute) or too old to matter
	}
	name, r := f.route(s.Route)
	k := freshKey{name, s.Caller}
	prev, seen := f.last[k]
	repeat := false
	if seen {
		d := at - prev.at
		repeat = prev.resp == s.Response && d >= -int64(RepeatWindow) && d <= int64(RepeatWindow)
	}
	switch {
	case seen && at < prev.at:
		// An older sample arriving late (another process): judged against
		// the newest, which stays.
	case seen || len(f.last) < maxFreshKeys:
		f.last[k] = freshLast{at: at, resp: s.Response}
	default:
		if now >= f.nextSweep-int64(freshSweepEvery)+int64(10*time.Second) {
			f.sweep(now)
		}
		if len(f.last) < maxFreshKeys {
			f.last[k] = freshLast{at: at, resp: s.Response}
		} else {
			f.untracked++
		}
	}
	h := at / int64(time.Hour)
	slot := &r.hours[h%int64(len(r.hours))]
	if slot.hour != h {
		*slot = hourSlot{hour: h}
	}
	slot.samples++
	if repeat {
		slot.repeats++
	}
}

// merge merges the freshness section of rep: samples always (the repeat
// state must see them again on replay), the live counters only for
// reports received live. It is the one place that reads the section.
func (fp *freshPart) merge(rep *report.Report, now time.Time, live bool) {
	fw, ok := report.SectionOf[freshness.Window](rep)
	if !ok {
		return
	}
	fr := &fw
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.state == nil {
		fp.state = newFreshState()
	}
	fp.state.merge(fr, now, live)
}

func (f *freshState) merge(fr *freshness.Window, now time.Time, live bool) {
	n := now.UnixNano()
	if n >= f.nextSweep {
		f.sweep(n)
	}
	for _, smp := range fr.Samples {
		f.sample(smp, n)
	}
	if !live {
		return
	}
	f.dropped += fr.SamplesDropped
	m := now.Unix() / 60
	for _, x := range fr.Routes {
		_, r := f.route(x.Route)
		slot := &r.live[m%freshLiveMinutes]
		if slot.minute != m {
			*slot = freshMinute{minute: m}
		}
		slot.requests += x.Requests
		slot.revalidated += x.Revalidated
	}
	for _, x := range fr.Rules {
		route, _ := f.route(x.Route)
		rule := x.Rule
		if rule == "" || len(rule) > 64 {
			rule = "other"
		}
		k := ruleKey{rule, route}
		ring := f.rules[k]
		if ring == nil {
			if len(f.rules) >= maxFreshRuleCells {
				k.rule = "other"
				if ring = f.rules[k]; ring == nil && len(f.rules) >= maxFreshRuleCells+maxFreshRoutes {
					continue
				}
			}
			if ring == nil {
				k.rule = strings.Clone(k.rule)
				ring = new([freshLiveMinutes]ruleMinute)
				f.rules[k] = ring
			}
		}
		slot := &ring[m%freshLiveMinutes]
		if slot.minute != m {
			*slot = ruleMinute{minute: m}
		}
		slot.matched += x.Matched
		slot.served += x.Served
		slot.right += x.Right
		slot.wrong += x.Wrong
	}
}

// Freshness returns the freshness view now.
func (s *Server) Freshness() api.Freshness { return s.feat.fresh.view() }

// view is the freshness view now: the policy's freshness rules, each
// route's repeat share and live counters, each rule's.
func (fp *freshPart) view() api.Freshness {
	now := fp.now()
	v := api.Freshness{Time: now.UTC(), RepeatWindow: RepeatWindow.Seconds(), LiveWindow: (freshLiveMinutes * time.Minute).Seconds(),
		Routes: []api.FreshnessRoute{}, Rules: []api.FreshnessRule{}}
	fp.pol.read(func(p *policy.Policy) {
		if p.Freshness != nil {
			f := *p.Freshness
			f.Rules = slices.Clone(f.Rules)
			v.Policy = &f
		}
	})
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.state == nil {
		return v
	}
	reqs := fp.state.routeRows(&v, now)
	fp.state.ruleRows(&v, now, reqs)
	sortFreshness(&v)
	return v
}

// routeRows adds the routes' rows to v and returns each route's requests
// over the live window.
func (f *freshState) routeRows(v *api.Freshness, now time.Time) map[string]uint64 {
	v.Tracked, v.Untracked, v.Dropped = len(f.last), f.untracked, f.dropped
	hNow := now.UnixNano() / int64(time.Hour)
	mNow := now.Unix() / 60
	reqs := map[string]uint64{}
	for name, r := range f.routes {
		row := api.FreshnessRoute{Route: name}
		for _, h := range r.hours {
			// The hours of the window: the current one and the 24 before
			// (a little over 24 h, as hours are whole).
			if h.hour <= hNow && h.hour > hNow-int64(len(r.hours)) {
				row.Samples += h.samples
				row.Repeats += h.repeats
			}
		}
		for _, m := range r.live {
			if m.minute <= mNow && m.minute > mNow-freshLiveMinutes {
				row.Requests += m.requests
				row.Revalidated += m.revalidated
			}
		}
		if row.Samples > 0 {
			row.RepeatShare = float64(row.Repeats) / float64(row.Samples)
		}
		if row.Samples == 0 && row.Requests == 0 {
			continue
		}
		reqs[name] = row.Requests
		v.Routes = append(v.Routes, row)
	}
	return reqs
}

// ruleRows adds the rules' rows to v.
func (f *freshState) ruleRows(v *api.Freshness, now time.Time, reqs map[string]uint64) {
	mNow := now.Unix() / 60
	for k, ring := range f.rules {
		row := api.FreshnessRule{Rule: k.rule, Route: k.route, Precision: -1}
		for _, m := range ring {
			if m.minute <= mNow && m.minute > mNow-freshLiveMinutes {
				row.Matched += m.matched
				row.Served += m.served
				row.Right += m.right
				row.Wrong += m.wrong
			}
		}
		if row.Matched == 0 && row.Right+row.Wrong == 0 {
			continue
		}
		if n := row.Right + row.Wrong; n > 0 {
			row.Precision = float64(row.Right) / float64(n)
		}
		if g := reqs[k.route]; g > 0 {
			row.Cut = float64(row.Matched) / float64(g)
		}
		v.Rules = append(v.Rules, row)
	}
}

// sortFreshness orders the routes by samples, then requests, and the
// rules in the policy's order.
func sortFreshness(v *api.Freshness) {
	slices.SortFunc(v.Routes, func(a, b api.FreshnessRoute) int {
		return cmp.Or(cmp.Compare(b.Samples, a.Samples), cmp.Compare(b.Requests, a.Requests), strings.Compare(a.Route, b.Route))
	})
	order := map[string]int{}
	if v.Policy != nil {
		for i, r := range v.Policy.Rules {
			order[r.ID] = i
		}
	}
	slices.SortFunc(v.Rules, func(a, b api.FreshnessRule) int {
		oa, okA := order[a.Rule]
		ob, okB := order[b.Rule]
		if okA != okB {
			if okA {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(oa, ob), strings.Compare(a.Rule, b.Rule), strings.Compare(a.Route, b.Route))
	})
}

// SetFreshness replaces the freshness part of the policy (who is recorded
// in the audit) and returns the new policy.
func (s *Server) SetFreshness(ctx context.Context, f policy.Freshness, who string) (policy.Policy, error) {
	now := s.cfg.Now().UTC()
	f.UpdatedBy = who
	if err := f.Validate(); err != nil {
		return policy.Policy{}, err
	}
	if err := checkFreshnessBounds(f); err != nil {
		return policy.Policy{}, err
	}
	f.Rules = slices.Clone(f.Rules)
	out, err := s.policy.change(now, func(next *policy.Policy) error {
		// A force_until sent back as the policy holds it (a client
		// changing the batch of a policy it read) is not a new override.
		if old := next.Freshness; old == nil || !old.Force || !old.ForceUntil.Equal(f.ForceUntil) {
			if err := checkUntil("force_until", f.Force, f.ForceUntil, now, s.cfg.MaxRuleTTL); err != nil {
				return err
			}
		}
		next.Freshness = &f
		return nil
	})
	if err != nil {
		return policy.Policy{}, err
	}
	s.policy.audit(ctx, now, who, "freshness", out.Version, f)
	return out, nil
}

// maxFreshAge bounds a freshness rule's max_age_seconds and
// max_app_age_seconds: a copy older than the repeat window is no longer
// measured as a repeat, so no rule needs more.
const maxFreshAge = RepeatWindow

// checkFreshnessBounds refuses a freshness rule whose ages are beyond
// maxFreshAge (policy.FreshnessRule.Validate checks they are finite and
// not negative).
func checkFreshnessBounds(f policy.Freshness) error {
	for _, r := range f.Rules {
		for _, a := range []struct {
			name string
			v    float64
		}{{"max_age_seconds", r.MaxAgeSeconds}, {"max_app_age_seconds", r.MaxAppAgeSeconds}} {
			if a.v > maxFreshAge.Seconds() {
				return fmt.Errorf("%w: freshness rule %s: %s %g, at most %g (%v, the repeat window)",
					policy.ErrInvalid, r.ID, a.name, a.v, maxFreshAge.Seconds(), maxFreshAge)
			}
		}
	}
	return nil
}

// checkUntil refuses an override's end (name: its JSON field) that has
// already passed or is more than maxTTL ahead, as checkRule does a rule's
// expiry; set false (or a zero until when optional) is not checked.
func checkUntil(name string, set bool, until, now time.Time, maxTTL time.Duration) error {
	switch {
	case !set || until.IsZero():
		return nil
	case !until.After(now):
		return fmt.Errorf("%w: %s %v has already passed (now is %v): give a time ahead, at most %v", policy.ErrInvalid, name, until.UTC(), now.UTC(), maxTTL)
	case until.After(now.Add(maxTTL)):
		return fmt.Errorf("%w: %s %v is more than %v ahead (the collector's --max-rule-ttl)", policy.ErrInvalid, name, until.UTC(), maxTTL)
	}
	return nil
}

func (s httpAPI) handleFreshness(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, s.Freshness())
}

func (s httpAPI) handleFreshnessPolicy(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, s.Policy().Freshness)
		})(w, r)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST", 0)
		return
	}
	body, who, ok := s.policyPost(w, r, "freshness policy")
	if !ok {
		return
	}
	var f policy.Freshness
	if err := decodeOne(body, &f, `{"rules":[{"id":"reload-10s","cause":"generic-reload","max_app_age_seconds":10}],"batch":1,"reason":"payday"}`); err != nil {
		writeError(w, http.StatusBadRequest, "freshness policy: "+err.Error(), 0)
		return
	}
	p, err := s.SetFreshness(r.Context(), f, who)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	s.writePolicy(w, p)
}
