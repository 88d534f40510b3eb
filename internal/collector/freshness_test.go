package collector

import (
	"context"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// freshBody is a report of process inst carrying fr.
func freshBody(t *testing.T, inst string, seq uint64, at time.Time, fr *freshness.Window) []byte {
	t.Helper()
	rep := &report.Report{Source: report.Source{Service: "balance", Instance: inst, Host: "h"}, Seq: seq,
		Start: at.Add(-time.Second), End: at}
	if fr != nil && !fr.Empty() {
		rep.SetSection(*fr)
	}
	b, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRepeatShareSynthetic runs a workload whose repeat share is known:
// on GET /balance each of 300 callers makes 20 GETs 30 minutes apart and
// its balance changes before GETs 0, 5, 10 and 15, so 16 of 20 repeat the
// previous response (0.8); on GET /feed every response is new (0); one
// caller repeats a response only after 25 h, which is no repeat.
func TestRepeatShareSynthetic(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	seq := uint64(0)
	start := f.clk.Now()
	for step := range 20 {
		now := start.Add(time.Duration(step) * 30 * time.Minute)
		f.clk.Set(now)
		fr := &freshness.Window{}
		for c := range 300 {
			version := uint64(step / 5)
			fr.Samples = append(fr.Samples,
				freshness.Sample{At: now, Route: "GET /balance", Caller: uint64(c), Response: uint64(c)<<8 | version},
				freshness.Sample{At: now, Route: "GET /feed", Caller: uint64(c), Response: uint64(c)<<8 | uint64(step)})
		}
		// Two processes share the callers: halves of the samples go to each.
		half := len(fr.Samples) / 2
		seq++
		if st := f.ingest(freshBody(t, "p1", seq, now, &freshness.Window{Samples: fr.Samples[:half]})); st != 200 {
			t.Fatal(st)
		}
		if st := f.ingest(freshBody(t, "p2", seq, now, &freshness.Window{Samples: fr.Samples[half:]})); st != 200 {
			t.Fatal(st)
		}
	}
	// The caller with a day-long gap, on its own route.
	late := f.clk.Now()
	seq++
	f.ingest(freshBody(t, "p1", seq, late, &freshness.Window{Samples: []freshness.Sample{{At: late, Route: "GET /statement", Caller: 9, Response: 77}}}))
	f.clk.Set(late.Add(25 * time.Hour))
	seq++
	f.ingest(freshBody(t, "p1", seq, f.clk.Now(), &freshness.Window{Samples: []freshness.Sample{{At: f.clk.Now(), Route: "GET /statement", Caller: 9, Response: 77}}}))
	f.clk.Set(late.Add(time.Minute)) // back, to read the first two routes inside their window

	got := map[string]api.FreshnessRoute{}
	for _, r := range f.s.Freshness().Routes {
		got[r.Route] = r
	}
	if b := got["GET /balance"]; b.Samples != 6000 || b.Repeats != 4800 || math.Abs(b.RepeatShare-0.8) > 1e-12 {
		t.Errorf("GET /balance: %+v, want 6000 samples, 4800 repeats (0.8)", b)
	}
	if fd := got["GET /feed"]; fd.Samples != 6000 || fd.Repeats != 0 {
		t.Errorf("GET /feed: %+v, want no repeat", fd)
	}
	f.clk.Set(late.Add(25*time.Hour + time.Minute))
	got = map[string]api.FreshnessRoute{}
	for _, r := range f.s.Freshness().Routes {
		got[r.Route] = r
	}
	if st := got["GET /statement"]; st.Repeats != 0 || st.Samples != 1 {
		t.Errorf("GET /statement (25 h gap, first sample out of the window): %+v", st)
	}
	if _, ok := got["GET /balance"]; ok {
		t.Errorf("GET /balance still in the view 25 h later: %+v", got["GET /balance"])
	}
}

func TestFreshnessSamplesBounded(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	now := f.clk.Now()
	fs := newFreshState()
	n := now.UnixNano()
	for c := range maxFreshKeys + 10 {
		fs.sample(freshness.Sample{At: now, Route: "r", Caller: uint64(c), Response: 1}, n)
	}
	if len(fs.last) != maxFreshKeys || fs.untracked != 10 {
		t.Errorf("%d tracked, %d untracked", len(fs.last), fs.untracked)
	}
	for i := range maxFreshRoutes + 5 {
		fs.route(string(rune('a'+i%26)) + string(rune('0'+i)))
	}
	if len(fs.routes) > maxFreshRoutes+1 {
		t.Errorf("%d routes", len(fs.routes))
	}
	// Samples from the future and from before the window are ignored.
	before := len(fs.last)
	fs.sweep(n)
	fs.sample(freshness.Sample{At: now.Add(time.Hour), Route: "r", Caller: 1 << 40, Response: 1}, n)
	fs.sample(freshness.Sample{At: now.Add(-25 * time.Hour), Route: "r", Caller: 1 << 41, Response: 1}, n)
	if len(fs.last) != before {
		t.Errorf("out-of-window samples tracked")
	}
}

func TestFreshnessRulesAndPolicy(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	c, _ := api.NewClient(srv.URL)
	ctx := context.Background()

	fp := policy.Freshness{Rules: policy.MonzoRules(), Batch: 2, Reason: "payday herd"}
	if _, err := c.PostFreshness(ctx, fp, "wrong"); err == nil {
		t.Fatal("freshness change without the token accepted")
	}
	bad := fp
	bad.Batch = 9
	if _, err := c.PostFreshness(ctx, bad, f.token); err == nil {
		t.Fatal("invalid freshness policy accepted")
	}
	p, err := c.PostFreshness(ctx, fp, f.token)
	if err != nil || p.Freshness == nil || p.Freshness.Batch != 2 || p.Version != 1 {
		t.Fatalf("post freshness: %+v %v", p, err)
	}
	// A throttle rule added later keeps the freshness part.
	rule := policy.Rule{ID: "x", Tenant: "acme", Action: policy.Throttle, RUPerSecond: 1, Reason: "r", Expires: t0.Add(time.Hour)}
	if p, err = c.PostPolicy(ctx, rule, f.token); err != nil || p.Freshness == nil || p.Freshness.Batch != 2 {
		t.Fatalf("throttle after freshness: %+v %v", p, err)
	}
	// Replies carry it.
	_, _, _, _, reply := ingest(f.s, freshBody(t, "p1", 1, f.clk.Now(), &freshness.Window{
		Routes: []freshness.RouteCount{{Route: "GET /balance", Requests: 100, Revalidated: 5}},
		Rules: []freshness.RuleCount{{Rule: "push-24h", Route: "GET /balance", Matched: 20, Right: 16, Wrong: 4},
			{Rule: "app-open-1h", Route: "GET /balance", Matched: 10, Served: 10}},
	}))
	r, err := report.DecodeReply(reply)
	if rp := replyPolicy(r); err != nil || rp == nil || rp.Freshness == nil || rp.Freshness.Rules[0].ID != "push-24h" {
		t.Fatalf("reply %+v %v", r.Policy, err)
	}
	v, err := c.GetFreshness(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Rules) != 2 || v.Rules[0].Rule != "push-24h" || v.Rules[0].Precision != 0.8 || v.Rules[0].Cut != 0.2 ||
		v.Rules[1].Served != 10 || v.Rules[1].Precision != -1 || v.Policy == nil || v.Policy.Batch != 2 {
		t.Fatalf("view %+v", v)
	}
	// The live window forgets.
	f.clk.Add(11 * time.Minute)
	if v, _ := c.GetFreshness(ctx); len(v.Rules) != 0 {
		t.Errorf("rules after the live window: %+v", v.Rules)
	}
	// It survives a restart.
	f.stop()
	f.start()
	if got := f.s.Policy(); got.Freshness == nil || got.Freshness.Reason != "payday herd" {
		t.Fatalf("after restart: %+v", got.Freshness)
	}
}

func TestWriteFreshness(t *testing.T) {
	v := api.Freshness{RepeatWindow: 86400, LiveWindow: 600,
		Routes: []api.FreshnessRoute{{Route: "GET /balance", Samples: 1000, Repeats: 700, RepeatShare: 0.7}},
		Rules:  []api.FreshnessRule{{Rule: "push-24h", Route: "GET /balance", Matched: 20, Right: 16, Wrong: 4, Precision: 0.8, Cut: 0.2}}}
	for format, want := range map[string][]string{
		FormatTable: {"within 24 h", "GET /balance", "70.0%", "push-24h", "80.0%", "20.0%"},
		FormatCSV:   {"route,sampled_gets,repeats,repeat_share", "GET /balance,1000,700,0.7000"},
		FormatJSON:  {`"repeat_share": 0.7`, `"precision": 0.8`},
	} {
		var b strings.Builder
		if err := WriteFreshness(&b, v, format); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: %q missing from\n%s", format, w, b.String())
			}
		}
	}
	if err := WriteFreshness(io.Discard, v, "xml"); err == nil {
		t.Error("format xml accepted")
	}
}
