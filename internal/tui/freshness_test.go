package tui

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// freshFake is a fakeSource with a freshness view.
type freshFake struct {
	*fakeSource
	fmu  sync.Mutex
	v    api.Freshness
	sets []policy.Freshness
}

func (f *freshFake) Freshness(context.Context) (api.Freshness, error) {
	f.fmu.Lock()
	defer f.fmu.Unlock()
	return f.v, nil
}

func (f *freshFake) SetFreshness(_ context.Context, p policy.Freshness) error {
	f.fmu.Lock()
	defer f.fmu.Unlock()
	f.sets = append(f.sets, p)
	return nil
}

func freshView() api.Freshness {
	fp := &policy.Freshness{Rules: policy.MonzoRules(), Batch: 1}
	fp.Rules[0].Shadow = true
	return api.Freshness{Time: t0, RepeatWindow: 86400, LiveWindow: 600, Policy: fp,
		Routes: []api.FreshnessRoute{{Route: "GET /accounts/{id}/balance", Samples: 5000, Repeats: 3500, RepeatShare: 0.7, Requests: 90000, Revalidated: 20000}},
		Rules:  []api.FreshnessRule{{Rule: "push-24h", Route: "GET /accounts/{id}/balance", Matched: 18000, Right: 14400, Wrong: 3600, Precision: 0.8, Cut: 0.2}}}
}

// run executes cmd (not a batch: it could hold a blocking fetch) and
// feeds its message back.
func run(m *Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	if msg := cmd(); msg != nil {
		m.Update(msg)
	}
}

func TestFreshnessViewAndBatchKeys(t *testing.T) {
	src := &freshFake{fakeSource: newFake(Features{Throttle: true}), v: freshView()}
	m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	m.Update(snapshotMsg{incident()})
	press(m, "5")
	run(m, press(m, "7"))
	if m.nav.cur.name() != "Freshness" || m.nav.tab().name() != "Freshness" {
		t.Fatalf("view %s (tab %s)", m.nav.cur.name(), m.nav.tab().name())
	}
	screen := m.View()
	for _, want := range []string{"GET /accounts/{id}/balance", "70.0%", "push-24h", "shadow", "80.0%", "20.0%", "app-open-1h", "off", "batch 1 of 3"} {
		mustContain(t, screen, want)
	}
	for i, l := range strings.Split(screen, "\n") {
		if ansi.StringWidth(l) > 120 {
			t.Fatalf("line %d is %d wide", i, ansi.StringWidth(l))
		}
	}
	// + arms the next rule, f forces the batch, - disarms one.
	run(m, press(m, "+"))
	run(m, press(m, "f"))
	run(m, press(m, "-"))
	src.fmu.Lock()
	sets := append([]policy.Freshness(nil), src.sets...)
	src.fmu.Unlock()
	if len(sets) != 3 || sets[0].Batch != 2 || !sets[1].Force || !sets[1].ForceUntil.Equal(t0.Add(ForceFor)) || sets[2].Batch != 1 || !sets[2].Force {
		t.Fatalf("policies posted %+v", sets)
	}
	mustContain(t, m.View(), "FORCED")
	// A new snapshot refreshes the view too.
	src.fmu.Lock()
	src.v.Routes[0].RepeatShare = 0.55
	src.fmu.Unlock()
	if _, cmd := m.Update(snapshotMsg{incident()}); cmd == nil {
		t.Fatal("a snapshot asked for nothing")
	}
	run(m, viewOf[*freshnessView](m).fetch(&m.c))
	mustContain(t, m.View(), "55.0%")
	// tab leaves it for the next tab, shift+tab comes back and asks again.
	press(m, "tab")
	if m.nav.cur.name() != "Victims" {
		t.Errorf("tab went to view %s", m.nav.cur.name())
	}
	if cmd := press(m, "shift+tab"); m.nav.cur.name() != "Freshness" || cmd == nil {
		t.Errorf("shift+tab went to view %s, fetching %v", m.nav.cur.name(), cmd != nil)
	}
	press(m, "5")
	// The keys mean nothing elsewhere.
	if cmd := press(m, "+"); cmd != nil {
		t.Error("+ acted outside the Freshness view")
	}
}

func TestFreshnessViewWithoutSupport(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	press(m, "7")
	mustContain(t, m.View(), "no freshness view")
	press(m, "+")
	mustContain(t, m.View(), "no freshness policy")
	// A recording of a source without one has none either.
	rec, err := NewRecorder(newFake(Features{Throttle: true}), filepath.Join(t.TempDir(), "r.qtop"), t0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if _, ok := freshnessOf(rec); ok {
		t.Fatal("a recording of a source without freshness has a freshness view")
	}
}

// TestFreshnessWhileRecording: qtop --record on a collector keeps the
// Freshness view and its keys (the README's incident steps record).
func TestFreshnessWhileRecording(t *testing.T) {
	src := &freshFake{fakeSource: newFake(Features{Throttle: true}), v: freshView()}
	rec, err := NewRecorder(src, filepath.Join(t.TempDir(), "r.qtop"), t0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	m := New(rec, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	m.Update(snapshotMsg{incident()})
	run(m, press(m, "7"))
	mustContain(t, m.View(), "push-24h")
	run(m, press(m, "+"))
	src.fmu.Lock()
	defer src.fmu.Unlock()
	if len(src.sets) != 1 || src.sets[0].Batch != 2 {
		t.Fatalf("+ while recording posted %+v", src.sets)
	}
}

func TestFreshnessCollectorSource(t *testing.T) {
	srv, url, _ := realCollector(t)
	c, err := NewCollector(url, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.SetFreshness(ctx, policy.Freshness{Rules: policy.MonzoRules(), Batch: 2}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rep := &report.Report{Source: report.Source{Service: "b", Instance: "i"}, Seq: 1, Start: now.Add(-time.Second), End: now}
	rep.SetSection(freshness.Window{Routes: []freshness.RouteCount{{Route: "GET /b", Requests: 10}},
		Rules: []freshness.RuleCount{{Rule: "push-24h", Route: "GET /b", Matched: 2, Right: 1, Wrong: 1}}})
	if _, err := srv.Consume(ctx, rep, nil); err != nil {
		t.Fatal(err)
	}
	v, err := c.Freshness(ctx)
	if err != nil || v.Policy == nil || v.Policy.Batch != 2 || len(v.Rules) != 1 || v.Rules[0].Precision != 0.5 {
		t.Fatalf("%+v %v", v, err)
	}
	bad, _ := NewCollector(url, "wrong")
	defer bad.Close()
	if err := bad.SetFreshness(ctx, policy.Freshness{}); err == nil {
		t.Error("freshness change with a wrong token accepted")
	}
}

// hintedFresh is a freshness source that says why its view is empty, as
// the demo does.
type hintedFresh struct{ *freshFake }

func (hintedFresh) FreshnessHint() string {
	return "the demo's fleet samples no GET: run go run ./examples/balance --collector http://127.0.0.1:7070 --sampling 10"
}

// TestFreshnessEmptySaysWhy: a freshness view with no route and no rule
// says why and what to run, whole at 60 columns (the source's own hint
// when it has one); a source without one says where the view lives.
func TestFreshnessEmptySaysWhy(t *testing.T) {
	plain := &freshFake{fakeSource: newFake(Features{Throttle: true})}
	for _, c := range []struct {
		src  Source
		want string
	}{
		{plain, "no GET sampled yet: the services report them to the collector with freshness.WithSampling " +
			"(go run ./examples/balance --collector URL --sampling 10 is one)"},
		{hintedFresh{plain}, hintedFresh{}.FreshnessHint()},
		{newFake(Features{Throttle: true}), "this source has no freshness view: it is the collector's, from the services that sample GETs " +
			"(freshness.WithSampling); run qtop --collector URL, or qtop demo"},
	} {
		for _, w := range []int{60, 80, 120} {
			m := New(c.src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC))
			m.Update(tea.WindowSizeMsg{Width: w, Height: 24})
			m.Update(snapshotMsg{incident()})
			run(m, press(m, "7"))
			screen := m.View()
			for i, l := range strings.Split(screen, "\n") {
				if ansi.StringWidth(l) > w {
					t.Fatalf("%d columns: line %d is %d wide:\n%s", w, i, ansi.StringWidth(l), screen)
				}
			}
			if flat := strings.Join(strings.Fields(screen), " "); !strings.Contains(flat, c.want) {
				t.Errorf("%d columns: the view does not say %q:\n%s", w, c.want, screen)
			}
		}
	}
}
