package pilotpg

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
)

// firstApply is the run's first apply decision.
func (r *run) firstApply() (autopilot.Decision, bool) {
	for _, d := range r.decisions {
		if d.Kind == autopilot.KindApply {
			return d, true
		}
	}
	return autopilot.Decision{}, false
}

// index is the index of the first second at or after off from the
// noise's start (len(r.secs): none).
func (r *run) index(off time.Duration) int {
	for i, s := range r.secs {
		if s.at >= off {
			return i
		}
	}
	return len(r.secs)
}

// first is the first second at or after from for which ok holds (-1:
// none).
func (r *run) first(from int, ok func(second) bool) int {
	for i := max(from, 0); i < len(r.secs); i++ {
		if ok(r.secs[i]) {
			return i
		}
	}
	return -1
}

// rate is the noisy tenant's admitted jobs a second over secs[from:to].
func (r *run) rate(from, to int) float64 {
	if to <= from {
		return 0
	}
	var n int64
	for _, s := range r.secs[from:to] {
		n += s.admitted
	}
	return float64(n) / float64(to-from)
}

// phases are the indexes the checks and the figures use: the noise's
// start, the apply (len(secs) without one), the victims hurt (≥
// victims_min at ≥ 1.5×, -1: never), back (fewer for sustain seconds
// after the apply, -1: never), all back (none at 1.5× for sustain
// seconds) and the clients' p95 back under 1.5× their own baseline.
type phases struct {
	noise, apply, hurt, healed, allClear, clientBack int
	clientFirst                                      int // the first second after the apply with the clients' p95 under 1.5× their own baseline
	readmitted                                       int // the noisy tenant's first job admitted after the apply's second
}

func (r *run) phases() phases {
	var p phases
	p.noise = r.index(0)
	p.apply = len(r.secs)
	if d, ok := r.firstApply(); ok {
		p.apply = r.index(d.Time.Sub(r.noiseStart))
	}
	vm := victimsMin()
	p.hurt = r.first(p.noise, func(s second) bool { return s.hurt >= vm })
	p.healed = r.healedAt(p.apply, func(s second) bool { return s.hurt < vm })
	p.allClear = r.healedAt(p.apply, func(s second) bool { return s.hurt == 0 })
	under := func(s second) bool { return s.clientP95 > 0 && s.clientP95*2 < r.clientBase*3 }
	p.clientBack = r.healedAt(p.apply, under)
	p.clientFirst = r.first(p.apply+1, under)
	p.readmitted = r.first(p.apply+1, func(s second) bool { return s.admitted > 0 })
	return p
}

// checkEnforce: one apply, against the noisy tenant, after the noise
// started and after the victims were hurt; the victims recover after it;
// the noisy tenant is refused at the source and still admits work, fewer
// jobs a second than in the noise before the apply.
func checkEnforce(t *testing.T, r *run, rule policy.AutopilotRule) {
	t.Helper()
	d, ok := r.firstApply()
	if !ok {
		t.Fatalf("enforce: no apply; decisions %v", r.decisions)
	}
	for _, x := range r.decisions {
		if x.Kind == autopilot.KindApply && x.Tenant != noisy.Tenant {
			t.Errorf("enforce: a false action: %v", x)
		}
	}
	if d.Tenant != noisy.Tenant || d.Shadow || d.Action != policy.AutopilotQuota || !d.Time.After(r.noiseStart) {
		t.Fatalf("enforce: first apply %v at %v from the noise: want an enforced quota on %s after the noise started",
			d, d.Time.Sub(r.noiseStart), noisy.Tenant)
	}
	p := r.phases()
	switch {
	case p.hurt < 0:
		t.Errorf("enforce: the victims were never hurt (≥ %d at ≥ 1.5×) in qtop's headline", rule.VictimsMin)
	case p.healed < 0:
		t.Errorf("enforce: the victims did not recover after the apply (within %v of noise)", noiseMax)
	}
	before, afterRate := r.rate(p.noise, p.apply), r.rate(min(p.apply+3, len(r.secs)), len(r.secs))
	if afterRate <= 0 {
		t.Errorf("enforce: the noisy tenant was stopped, not slowed: no job admitted from 3 s after the apply")
	}
	if p.apply > p.noise && afterRate >= before {
		t.Errorf("enforce: the noisy tenant was not slowed: %.1f jobs/s before the apply, %.1f after", before, afterRate)
	}
	if r.throttled == 0 {
		t.Errorf("enforce: no job of the noisy tenant was refused at the source")
	}
}

// checkShadow: the first apply in shadow names the same tenant as
// enforce's, within one interval of it from the noise's start, and the
// agents refused none of the noisy tenant's work, counting the shadow
// quota's refusals instead.
func checkShadow(t *testing.T, sh, enf *run, rule policy.AutopilotRule) {
	t.Helper()
	s, ok := sh.firstApply()
	if !ok {
		t.Fatalf("shadow: no apply; decisions %v", sh.decisions)
	}
	e, ok := enf.firstApply()
	if !ok {
		t.Fatal("enforce: no apply to compare with")
	}
	diff := s.Time.Sub(sh.noiseStart) - e.Time.Sub(enf.noiseStart)
	if !s.Shadow || s.Tenant != e.Tenant || diff < -rule.Interval() || diff > rule.Interval() {
		t.Errorf("shadow: first apply %v at %v from the noise; enforce %v at %v: want the same tenant within ±%v",
			s, s.Time.Sub(sh.noiseStart), e, e.Time.Sub(enf.noiseStart), rule.Interval())
	}
	if sh.throttled != 0 || sh.shadowThrottled == 0 {
		t.Errorf("shadow: %d of the noisy tenant's jobs refused (want 0), %d counted in shadow (want > 0)", sh.throttled, sh.shadowThrottled)
	}
}

// log writes the run's figures and its seconds from the noise on.
func (r *run) log(t *testing.T) {
	t.Helper()
	p := r.phases()
	at := func(i int) string {
		if i < 0 || i >= len(r.secs) {
			return "never"
		}
		return fmt.Sprintf("+%ds", int(r.secs[i].at.Round(time.Second)/time.Second))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: noise at +0s; victims hurt (≥%d at ≥1.5×, qtop's headline) %s; ", r.mode, victimsMin(), at(p.hurt))
	if d, ok := r.firstApply(); ok {
		fmt.Fprintf(&b, "apply at +%.1fs (%s); ", d.Time.Sub(r.noiseStart).Seconds(), d.String())
	}
	fmt.Fprintf(&b, "victims back (<%d at 1.5× for %ds) %s, all under 1.5× %s; clients' p95 base %v, under 1.5× %s, for %ds %s; ",
		victimsMin(), sustain, at(p.healed), at(p.allClear), r.clientBase.Round(10*time.Microsecond), at(p.clientFirst), sustain, at(p.clientBack))
	warmTo := p.noise
	fmt.Fprintf(&b, "noisy jobs/s: at rest %.1f, in the noise before the apply %.1f, from 3 s after it %.1f (first admitted again %s); refused at the source %d, in shadow %d",
		r.rate(max(warmTo-30, 0), warmTo), r.rate(p.noise, p.apply), r.rate(min(p.apply+3, len(r.secs)), len(r.secs)), at(p.readmitted),
		r.throttled, r.shadowThrottled)
	t.Log(b.String())
	for _, s := range r.secs[max(p.noise-3, 0):] {
		mark := ""
		if s.applied {
			mark = " acting"
		}
		t.Logf("%s %+4ds hurt=%d worst=×%.1f noisyRU=%.0f admitted=%d refused=%d clientP95=%v%s", r.mode,
			int(s.at.Round(time.Second)/time.Second), s.hurt, s.worst, s.noisyRU, s.admitted, s.refused, s.clientP95.Round(100*time.Microsecond), mark)
	}
}
