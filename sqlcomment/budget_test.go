package sqlcomment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

var bt0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return bt0.Add(d) }

const q1 = "SELECT * FROM reports WHERE id = 42"

func mustSet(t *testing.T, b *Budgets, bs []policy.Budget, rs []policy.Runaway) {
	t.Helper()
	if err := b.Set(bs, rs); err != nil {
		t.Fatal(err)
	}
}

func budgetErr(t *testing.T, err error) *BudgetError {
	t.Helper()
	var be *BudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrBudget) {
		t.Fatalf("err = %v, want a *BudgetError that is ErrBudget", err)
	}
	return be
}

func TestBudgetConcurrencyEnforce(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "test"}}, nil)
	an := tenant.Tags{Tenant: "analytics"}
	other := tenant.Tags{Tenant: "acme"}
	cfg := &config{}
	tk1, err := b.Admit(at(0), &an, cfg, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Admit(at(time.Millisecond), &an, cfg, q1, false)
	be := budgetErr(t, err)
	if be.Budget != "analytics" || be.Limit != LimitConcurrency || be.RetryAfter != DefaultColdStart {
		t.Fatalf("refusal = %+v", be)
	}
	if _, err := b.Admit(at(time.Millisecond), &other, cfg, q1, false); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	b.Finish(&tk1, at(2*time.Second), 2*time.Second, false)
	tk, err := b.Admit(at(2*time.Second), &an, cfg, q1, false)
	if err != nil {
		t.Fatalf("after the first finished: %v", err)
	}
	// The estimate learned the measured 2 s.
	if tk.slots[0].est != 2 {
		t.Fatalf("estimate = %v, want 2", tk.slots[0].est)
	}
	bs, _ := b.Stats()
	if bs[0].Refused[LimitConcurrency-1] != 1 || bs[0].Admitted != 2 || bs[0].InFlight != 1 {
		t.Fatalf("stats = %+v", bs[0])
	}
}

// TestBudgetShareSteps walks a share bucket on fixed instants.
func TestBudgetShareSteps(t *testing.T) {
	b := NewBudgets(WithColdStart(100 * time.Millisecond))
	mustSet(t, b, []policy.Budget{{ID: "s", Share: 0.5, CapacitySeconds: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}}, nil)
	tags := tenant.Tags{Tenant: "acme"}
	cfg := &config{}
	steps := []struct {
		at     time.Duration
		finish time.Duration // > 0: finish the last ticket, which took this long, at at
		refuse Limit
		retry  time.Duration
		tokens float64
	}{
		{at: 0, tokens: 0.9}, // cold start 0.1 s taken from a full bucket
		{at: time.Second, finish: time.Second, tokens: 0.1},                                // +0.5 (capped at 1), then the 0.9 s more it took
		{at: time.Second, refuse: LimitShare, retry: 1800 * time.Millisecond, tokens: 0.1}, // estimate now 1 s
		{at: 2700 * time.Millisecond, refuse: LimitShare, retry: 100 * time.Millisecond, tokens: 0.95},
		{at: 2800 * time.Millisecond, tokens: 0}, // exactly 1 s banked: admitted
	}
	var last Ticket
	for i, s := range steps {
		now := at(s.at)
		if s.finish > 0 {
			b.Finish(&last, now, s.finish, false)
		} else {
			tk, err := b.Admit(now, &tags, cfg, q1, false)
			if s.refuse != 0 {
				be := budgetErr(t, err)
				if be.Limit != s.refuse || !near(be.RetryAfter.Seconds(), s.retry.Seconds()) {
					t.Fatalf("step %d: refusal %+v, want %v retry %v", i, be, s.refuse, s.retry)
				}
			} else if err != nil {
				t.Fatalf("step %d: %v", i, err)
			} else {
				last = tk
			}
		}
		bu := b.cur.Load().all[0]
		if got := bu.st.shared.share.TokensAt(now, bu.rate); !near(got, s.tokens) {
			t.Fatalf("step %d: tokens %v, want %v", i, got, s.tokens)
		}
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

func TestBudgetClockBackwards(t *testing.T) {
	b := NewBudgets(WithColdStart(time.Second))
	mustSet(t, b, []policy.Budget{{ID: "s", Share: 1, CapacitySeconds: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}}, nil)
	tags := tenant.Tags{Tenant: "acme"}
	tk, err := b.Admit(at(10*time.Second), &tags, &config{}, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	b.Finish(&tk, at(5*time.Second), time.Second, false) // the clock went back 5 s
	if _, err := b.Admit(at(6*time.Second), &tags, &config{}, q1, false); err == nil {
		t.Fatal("a clock that went backwards refilled the bucket")
	}
	if _, err := b.Admit(at(11*time.Second), &tags, &config{}, q1, false); err != nil {
		t.Fatalf("one second after the last refill: %v", err)
	}
}

func TestBudgetStatementCapAndWarn(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{
		{ID: "cap", MaxStatementSeconds: 0.5, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"},
		{ID: "warn", Concurrency: 1, Reason: "test"}, // Warn by default
	}, nil)
	tags := tenant.Tags{Tenant: "acme"}
	cfg := &config{}
	tk, err := b.Admit(at(0), &tags, cfg, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	tk2, err := b.Admit(at(0), &tags, cfg, q1, false) // over "warn": sent anyway
	if err != nil {
		t.Fatalf("warn mode refused: %v", err)
	}
	b.Finish(&tk, at(time.Second), time.Second, false)
	b.Finish(&tk2, at(time.Second), time.Second, false)
	_, err = b.Admit(at(time.Second), &tags, cfg, "select * from reports where id=7;", false)
	if be := budgetErr(t, err); be.Limit != LimitStatement || be.RetryAfter != 0 || be.Estimate != time.Second {
		t.Fatalf("refusal = %+v", be)
	}
	bs, _ := b.Stats()
	if bs[1].Warned[LimitConcurrency-1] != 1 || bs[1].InFlight != 0 || bs[0].Refused[LimitStatement-1] != 1 {
		t.Fatalf("stats = %+v", bs)
	}
	// The refusal by "cap" released what "warn" had taken.
	if bs[1].Admitted != 2 {
		t.Fatalf("warn admitted %d, want 2 (the refused one released)", bs[1].Admitted)
	}
	ev := b.Events()
	if len(ev) != 2 || ev[0].Handled != "warned" || ev[1].Handled != "refused" {
		t.Fatalf("events = %+v", ev)
	}
}

func TestBudgetMatch(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "m", Concurrency: 1, Mode: policy.Enforce, Reason: "test",
		Match: []map[string]string{{"tenant": "a", "route": "/r"}, {"tier": "T3", "application": "web"}, {"region": "eu"}}}}, nil)
	web := &config{application: "web"}
	eu := &config{static: []pair{{"region", "eu"}}}
	cases := []struct {
		tags tenant.Tags
		cfg  *config
		want bool
	}{
		{tenant.Tags{Tenant: "a", Route: "/r"}, &config{}, true},
		{tenant.Tags{Tenant: "a"}, &config{}, false},
		{tenant.Tags{Tenant: "b", Tier: tenant.T3}, web, true},
		{tenant.Tags{Tenant: "b", Tier: tenant.T3}, &config{}, false},
		{tenant.Tags{Tenant: "b", Tier: tenant.T2}, web, false},
		{tenant.Tags{}, eu, true},
	}
	for i, c := range cases {
		tk, err := b.Admit(at(0), &c.tags, c.cfg, q1, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.n == 1; got != c.want {
			t.Errorf("case %d: matched %v, want %v", i, got, c.want)
		}
		b.Finish(&tk, at(0), 0, false)
	}
}

func TestBudgetEachEviction(t *testing.T) {
	b := NewBudgets(WithMaxKeys(2))
	mustSet(t, b, []policy.Budget{{ID: "each", Each: "tenant", Concurrency: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}}, nil)
	cfg := &config{}
	admit := func(ten string, d time.Duration) (Ticket, error) {
		tags := tenant.Tags{Tenant: ten}
		return b.Admit(at(d), &tags, cfg, q1, false)
	}
	ta, _ := admit("a", 0)
	if _, err := admit("a", 0); err == nil {
		t.Fatal("each: a second statement of a was admitted")
	}
	tb, err := admit("b", time.Second) // a bucket of its own
	if err != nil {
		t.Fatal(err)
	}
	b.Finish(&tb, at(2*time.Second), time.Second, false)
	// Full (a busy, b idle): c replaces b.
	tc, err := admit("c", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st := b.cur.Load().all[0].st
	if _, ok := st.keys["b"]; ok || len(st.keys) != 2 || st.stats.evictions.Load() != 1 {
		t.Fatalf("keys after eviction: %v, evictions %d", len(st.keys), st.stats.evictions.Load())
	}
	// Full and both busy: d goes to the overflow bucket.
	td, err := admit("d", 4*time.Second)
	if err != nil || td.slots[0].k != &st.overflow || st.stats.overflows.Load() != 1 {
		t.Fatalf("overflow: %v %v", err, st.stats.overflows.Load())
	}
	for _, tk := range []*Ticket{&ta, &tc, &td} {
		b.Finish(tk, at(5*time.Second), time.Second, false)
	}
}

func TestBudgetTransactionRule(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "c", Concurrency: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}}, nil)
	tags := tenant.Tags{Tenant: "acme"}
	cfg := &config{}
	if err := b.AdmitBegin(at(0), &tags, cfg); err != nil {
		t.Fatal(err)
	}
	tk, err := b.Admit(at(0), &tags, cfg, q1, true)
	if err != nil {
		t.Fatal(err)
	}
	// A second statement in the transaction while the first is in flight:
	// over the limit, but never refused inside a transaction.
	tk2, err := b.Admit(at(0), &tags, cfg, q1, true)
	if err != nil {
		t.Fatalf("a statement inside a transaction was refused: %v", err)
	}
	// A new transaction is refused up front while the bucket is full.
	if be := budgetErr(t, b.AdmitBegin(at(0), &tags, cfg)); be.Limit != LimitConcurrency {
		t.Fatalf("begin refusal = %+v", be)
	}
	b.Finish(&tk, at(time.Second), time.Second, false)
	b.Finish(&tk2, at(time.Second), time.Second, false)
	if err := b.AdmitBegin(at(time.Second), &tags, cfg); err != nil {
		t.Fatalf("begin after the statements ended: %v", err)
	}
	bs, _ := b.Stats()
	if bs[0].InTx[LimitConcurrency-1] != 1 || bs[0].Refused[LimitConcurrency-1] != 1 {
		t.Fatalf("stats = %+v", bs[0])
	}
}

func TestRunawayWatch(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, nil, []policy.Runaway{
		{ID: "kill", Match: []map[string]string{{"tenant": "analytics"}}, AfterSeconds: 2, Action: policy.Cancel, CooldownSeconds: 60, Reason: "t"},
		{ID: "shadow", AfterSeconds: 1, Action: policy.Report, CooldownSeconds: 60, Reason: "t"},
	})
	an := tenant.Tags{Tenant: "analytics"}
	acme := tenant.Tags{Tenant: "acme"}
	cfg := &config{}
	tk, _ := b.Admit(at(0), &an, cfg, q1, false)
	if tk.Runaway() != 2*time.Second {
		t.Fatalf("deadline = %v", tk.Runaway())
	}
	b.Finish(&tk, at(2*time.Second), 2*time.Second, true)
	// The same shape (other literal) is refused for the cool-down.
	_, err := b.Admit(at(10*time.Second), &an, cfg, "select * from reports where id = 7", false)
	if be := budgetErr(t, err); be.Limit != LimitWatch || be.Budget != "kill" || be.RetryAfter != 52*time.Second {
		t.Fatalf("watch refusal = %+v", be)
	}
	if _, err := b.Admit(at(10*time.Second), &an, cfg, "select 1", false); err != nil {
		t.Fatalf("another shape: %v", err)
	}
	if _, err := b.Admit(at(62*time.Second), &an, cfg, q1, false); err != nil {
		t.Fatalf("after the cool-down: %v", err)
	}
	// A report rule: reported, watched, never refused.
	tk, _ = b.Admit(at(0), &acme, cfg, q1, false)
	if tk.Runaway() != 0 {
		t.Fatal("a report rule set a deadline")
	}
	b.Finish(&tk, at(3*time.Second), 3*time.Second, false)
	if _, err := b.Admit(at(4*time.Second), &acme, cfg, q1, false); err != nil {
		t.Fatalf("a report rule refused: %v", err)
	}
	_, rs := b.Stats()
	if rs[0].Cancelled != 1 || rs[0].Refused != 1 || rs[1].Reported != 1 || rs[1].Watched != 1 {
		t.Fatalf("runaway stats = %+v", rs)
	}
}

func TestBudgetSetKeepsState(t *testing.T) {
	b := NewBudgets()
	pb := policy.Budget{ID: "c", Concurrency: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}
	mustSet(t, b, []policy.Budget{pb}, nil)
	tags := tenant.Tags{Tenant: "acme"}
	tk, _ := b.Admit(at(0), &tags, &config{}, q1, false)
	pb.Concurrency = 2
	mustSet(t, b, []policy.Budget{pb}, nil) // live update: in flight kept
	tk2, err := b.Admit(at(0), &tags, &config{}, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admit(at(0), &tags, &config{}, q1, false); err == nil {
		t.Fatal("the update forgot the statements in flight")
	}
	pb.Mode = policy.Off
	mustSet(t, b, []policy.Budget{pb}, nil)
	if _, err := b.Admit(at(0), &tags, &config{}, q1, false); err != nil {
		t.Fatalf("off budget refused: %v", err)
	}
	b.Finish(&tk, at(time.Second), time.Second, false)
	b.Finish(&tk2, at(time.Second), time.Second, false)
	if err := b.Set([]policy.Budget{{ID: "bad", Reason: "no limit"}}, nil); !errors.Is(err, policy.ErrInvalid) {
		t.Fatalf("invalid budget: %v", err)
	}
}

func TestShape(t *testing.T) {
	same := []string{
		"SELECT * FROM t WHERE id = 42 AND name = 'x'",
		"select *  from t\n where id=42 and name='it''s' /*tenant='acme'*/;",
		"SELECT * FROM t WHERE id = 7 AND name = '' -- trailing\n",
		"SELECT * FROM t /* a /* nested */ comment */ WHERE id = 1.5e3 AND name = 'y'",
	}
	for _, q := range same[1:] {
		if Shape(q) != Shape(same[0]) {
			t.Errorf("Shape(%q) differs from Shape(%q)", q, same[0])
		}
	}
	differ := []string{"SELECT * FROM t WHERE id = $1", "SELECT * FROM t2 WHERE id = 42", "SELECT * FROM t WHERE id2 = 42"}
	for _, q := range differ {
		if Shape(q) == Shape(same[0]) {
			t.Errorf("Shape(%q) is the same as Shape(%q)", q, same[0])
		}
	}
	if Shape("select a1 from t") == Shape("select a2 from t") {
		t.Error("digits inside identifiers were taken as literals")
	}
}

func TestBudgetAdmitDoesNotAllocate(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{
		{ID: "each", Each: "tenant", Share: 100, Concurrency: 100, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"},
		{ID: "t", Match: []map[string]string{{"tenant": "t-1"}}, Concurrency: 1000, Reason: "test"},
	}, []policy.Runaway{{ID: "r", Match: []map[string]string{{"route": "/none"}}, AfterSeconds: 1, Action: policy.Cancel, Reason: "t"}})
	tags := tenant.Tags{Tenant: "t-1", Route: "/x"}
	cfg := &config{}
	now := bt0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		tk, err := b.Admit(now, &tags, cfg, q1, false)
		if err != nil {
			t.Fatal(err)
		}
		b.Finish(&tk, now, time.Millisecond, false)
	})
	if allocs != 0 {
		t.Fatalf("Admit+Finish allocate %v times", allocs)
	}
}

// TestBudgetConcurrencyHolds: under concurrent Admit and Finish, an
// Enforce concurrency budget never has more statements in flight than its
// limit, and every refusal is a concurrency refusal.
func TestBudgetConcurrencyHolds(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "c", Each: "tenant", Concurrency: 3, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}}, nil)
	var inFlight, peak [4]atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tags := tenant.Tags{Tenant: fmt.Sprintf("t%d", g%4)}
			for i := range 2000 {
				now := bt0.Add(time.Duration(i) * time.Millisecond)
				tk, err := b.Admit(now, &tags, &config{}, q1, false)
				if err != nil {
					var be *BudgetError
					if !errors.As(err, &be) || be.Limit != LimitConcurrency {
						t.Errorf("refusal %v", err)
						return
					}
					continue
				}
				n := inFlight[g%4].Add(1)
				for p := peak[g%4].Load(); n > p && !peak[g%4].CompareAndSwap(p, n); p = peak[g%4].Load() {
				}
				inFlight[g%4].Add(-1)
				b.Finish(&tk, now, time.Millisecond, false)
			}
		}()
	}
	wg.Wait()
	for i := range peak {
		if p := peak[i].Load(); p > 3 {
			t.Fatalf("tenant t%d: %d in flight, limit 3", i, p)
		}
	}
	bs, _ := b.Stats()
	if bs[0].InFlight != 0 || bs[0].Keys != 4 {
		t.Fatalf("stats after the run: %+v", bs[0])
	}
}

// FuzzShape: Shape never panics, and a statement with a sqlcommenter
// comment appended has the shape of the statement without it.
func FuzzShape(f *testing.F) {
	for _, q := range []string{q1, "select 'a''b' -- c\n", "/* /* */ */ x", "SELECT $1::int8 + 1;", "1e5.5", "'"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		h := Shape(q)
		if strings.Contains(q, "/*") || strings.Contains(q, "--") || strings.Contains(q, "'") ||
			strings.HasSuffix(strings.TrimRight(q, " \t\n\r\f;"), "-") || strings.HasSuffix(q, "/") {
			return // an open comment or literal would swallow what follows
		}
		if got := Shape(q + " /*tenant='acme'*/"); got != h {
			t.Fatalf("Shape(%q) changed with a comment appended", q)
		}
	})
}

// TestBudgetExpires: a budget or rule with an expiry stops applying at it,
// without a new policy.
func TestBudgetExpires(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "c", Concurrency: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "t", Expires: at(time.Minute)}},
		[]policy.Runaway{{ID: "r", AfterSeconds: 1, Action: policy.Cancel, ConfirmBroad: true, Reason: "t", Expires: at(time.Minute)}})
	tags := tenant.Tags{Tenant: "a"}
	tk, _ := b.Admit(at(0), &tags, &config{}, q1, false)
	if tk.n != 1 || tk.Runaway() != time.Second {
		t.Fatalf("before the expiry: %d budgets, deadline %v", tk.n, tk.Runaway())
	}
	if _, err := b.Admit(at(59*time.Second), &tags, &config{}, q1, false); err == nil {
		t.Fatal("admitted over the limit before the expiry")
	}
	tk2, err := b.Admit(at(time.Minute), &tags, &config{}, q1, false)
	if err != nil || tk2.n != 0 || tk2.Runaway() != 0 {
		t.Fatalf("at the expiry: %v, %d budgets, deadline %v", err, tk2.n, tk2.Runaway())
	}
	b.Finish(&tk, at(time.Minute), time.Millisecond, false)
}

func TestBudgetColdStart(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "c", Concurrency: 1, ColdStartSeconds: 45, Mode: policy.Enforce, ConfirmBroad: true, Reason: "t"}}, nil)
	tags := tenant.Tags{Tenant: "a"}
	tk, _ := b.Admit(at(0), &tags, &config{}, q1, false)
	_, err := b.Admit(at(0), &tags, &config{}, q1, false)
	if be := budgetErr(t, err); be.RetryAfter != 45*time.Second || be.Estimate != 45*time.Second {
		t.Fatalf("refusal = %+v, want the budget's cold start", be)
	}
	b.Finish(&tk, at(time.Second), time.Second, false)
}

// TestBudgetWarnLogs: a Warn budget's violations are sent, counted and
// logged at most once a second per budget, with the count since the last
// line.
func TestBudgetWarnLogs(t *testing.T) {
	var buf strings.Builder
	b := NewBudgets(WithBudgetLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	mustSet(t, b, []policy.Budget{{ID: "w", Concurrency: 1, Reason: "t"}}, nil)
	tags := tenant.Tags{Tenant: "a"}
	var tks []Ticket
	for i := range 5 { // 4 violations within a second: one line
		tk, err := b.Admit(at(time.Duration(i)*time.Millisecond), &tags, &config{}, q1, false)
		if err != nil {
			t.Fatal(err)
		}
		tks = append(tks, tk)
	}
	tk, _ := b.Admit(at(2*time.Second), &tags, &config{}, q1, false) // a second line
	tks = append(tks, tk)
	for i := range tks {
		b.Finish(&tks[i], at(3*time.Second), time.Millisecond, false)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "budget=w") || !strings.Contains(lines[0], "handled=warned") ||
		!strings.Contains(lines[0], "violations_since_last_log=1") || !strings.Contains(lines[1], "violations_since_last_log=4") {
		t.Fatalf("log:\n%s", buf.String())
	}
}

// TestBudgetShareChangeRepaysDebt: an operator who raises the share of a
// tenant in debt (after one long statement under a small share) lets it
// back in as fast as the new share repays the debt, not after the hours
// the old share would have taken.
func TestBudgetShareChangeRepaysDebt(t *testing.T) {
	b := NewBudgets()
	tags := tenant.Tags{Tenant: "analytics"}
	cfg := &config{}
	set := func(share float64, now time.Time) {
		t.Helper()
		p := policy.Policy{Budgets: []policy.Budget{{ID: "a", Share: share, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}}}
		if err := b.SetPolicy(p, now); err != nil {
			t.Fatal(err)
		}
	}
	set(0.01, at(0))
	tk, err := b.Admit(at(0), &tags, cfg, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	b.Finish(&tk, at(100*time.Second), 100*time.Second, false) // about 100 s of database time owed
	steps := []struct {
		at       time.Duration
		share    float64 // > 0: set the budget's share first
		admitted bool
		retryMax time.Duration // when refused: RetryAfter at most
	}{
		{at: 101 * time.Second, admitted: false, retryMax: 3 * time.Hour},               // 100 s owed at 0.01/s
		{at: 101 * time.Second, share: 100, admitted: false, retryMax: 2 * time.Second}, // 100 s owed, 100 s needed, at 100/s
		{at: 102 * time.Second, admitted: false, retryMax: time.Second},
		{at: 103 * time.Second, admitted: true},
	}
	for i, s := range steps {
		if s.share > 0 {
			set(s.share, at(s.at))
		}
		tk, err := b.Admit(at(s.at), &tags, cfg, q1, false)
		if s.admitted {
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			b.Finish(&tk, at(s.at), 0, false)
			continue
		}
		if be := budgetErr(t, err); be.Limit != LimitShare || be.RetryAfter > s.retryMax {
			t.Fatalf("step %d: %v, want a share refusal with a retry within %v", i, err, s.retryMax)
		}
	}
}

// TestBudgetErrorSaysWhatToDo: a refusal says whether to retry, and when.
func TestBudgetErrorSaysWhatToDo(t *testing.T) {
	for _, c := range []struct {
		e           BudgetError
		want, avoid string
	}{
		{BudgetError{Budget: "b", Limit: LimitStatement, Estimate: 3 * time.Second}, "max_statement_seconds", "retry after"},
		{BudgetError{Budget: "r", Limit: LimitWatch, RetryAfter: 25 * time.Second}, `runaway rule "r"`, "budget"},
		{BudgetError{Budget: "r", Limit: LimitWatch, RetryAfter: 25 * time.Second}, "retry after 25s", "estimate"},
		{BudgetError{Budget: "b", Key: "acme", Limit: LimitConcurrency, RetryAfter: time.Second}, `"b" (acme): concurrency limit`, "\n"},
	} {
		msg := c.e.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, c.avoid) {
			t.Errorf("%+v: %q, want %q and not %q", c.e, msg, c.want, c.avoid)
		}
	}
}

// TestBudgetBeginRetryColdStart: a begin refused by a full concurrency
// retries after the budget's cold start, as a statement's refusal does.
func TestBudgetBeginRetryColdStart(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "c", Concurrency: 1, ColdStartSeconds: 30, Mode: policy.Enforce, ConfirmBroad: true, Reason: "test"}}, nil)
	tags := tenant.Tags{Tenant: "analytics"}
	tk, err := b.Admit(at(0), &tags, &config{}, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finish(&tk, at(time.Second), time.Second, false)
	_, err = b.Admit(at(0), &tags, &config{}, q1, false)
	stmt := budgetErr(t, err)
	be := budgetErr(t, b.AdmitBegin(at(0), &tags, &config{}))
	if be.Limit != LimitConcurrency || be.RetryAfter != 30*time.Second || be.RetryAfter != stmt.RetryAfter {
		t.Fatalf("begin refused with %v, a statement with %v: want a retry after the budget's cold start, 30s", be, stmt)
	}
}

// TestRunawayErr: a statement's error names the runaway rule only when the
// rule's deadline is what ended its context, not the caller's earlier
// deadline or cancel; it keeps the driver's error and is never wrapped
// twice.
func TestRunawayErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudgets()
		mustSet(t, b, nil, []policy.Runaway{{ID: "long-reports", Match: []map[string]string{{"tenant": "analytics"}},
			AfterSeconds: 2, Action: policy.Cancel, Reason: "t"}})
		an := tenant.Tags{Tenant: "analytics"}
		start := func(parent context.Context, tags tenant.Tags) (context.Context, context.CancelFunc) {
			tk, err := b.Admit(time.Now(), &tags, &config{}, q1, false)
			if err != nil {
				t.Fatal(err)
			}
			return tk.Context(parent)
		}
		driverErr := fmt.Errorf("timeout: %w", context.DeadlineExceeded)

		begin := time.Now()
		ctx, cancel := start(context.Background(), an)
		if err := RunawayErr(ctx, driverErr); err != driverErr {
			t.Fatalf("before the deadline: %v", err)
		}
		<-ctx.Done()
		if d := time.Since(begin); d != 2*time.Second {
			t.Fatalf("the rule's deadline after %v, want 2s", d)
		}
		err := RunawayErr(ctx, driverErr)
		var re *RunawayError
		if want := `sqlcomment: cancelled by runaway rule "long-reports" after 2s: timeout: context deadline exceeded`; err == nil ||
			err.Error() != want || !errors.As(err, &re) || re.Rule != "long-reports" || re.After != 2*time.Second ||
			!errors.Is(err, driverErr) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrRunaway) {
			t.Fatalf("after the rule's deadline: %v, want %q", err, want)
		}
		if again := RunawayErr(ctx, err); again != err {
			t.Fatalf("wrapped twice: %v", again)
		}
		if RunawayErr(ctx, nil) != nil {
			t.Fatal("nil wrapped")
		}
		// A driver that answers with the server's cancel error.
		server := errors.New("ERROR: canceling statement due to user request (SQLSTATE 57014)")
		if err := RunawayErr(ctx, server); !errors.Is(err, server) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrRunaway) {
			t.Fatalf("server's cancel: %v", err)
		}
		cancel() // rows.Err after Close still names the rule
		if err := RunawayErr(ctx, driverErr); !errors.Is(err, ErrRunaway) {
			t.Fatalf("after cancel: %v", err)
		}

		// The caller's deadline, earlier than the rule's.
		parent, pcancel := context.WithTimeout(context.Background(), time.Second)
		defer pcancel()
		ctx, cancel = start(parent, an)
		<-ctx.Done()
		time.Sleep(3 * time.Second) // past the rule's deadline too
		if err := RunawayErr(ctx, driverErr); err != driverErr {
			t.Fatalf("caller's deadline: %v", err)
		}
		cancel()
		// The caller's cancel, before the rule's deadline.
		parent, pcancel = context.WithCancel(context.Background())
		ctx, cancel = start(parent, an)
		pcancel()
		<-ctx.Done()
		time.Sleep(3 * time.Second) // past the rule's deadline too
		if err := RunawayErr(ctx, context.Canceled); err != context.Canceled {
			t.Fatalf("caller's cancel: %v", err)
		}
		cancel()
		// No rule: the caller's context as it is.
		if ctx, cancel := start(context.Background(), tenant.Tags{Tenant: "acme"}); ctx != context.Background() || cancel != nil {
			t.Fatal("a deadline without a rule")
		}
	})
}
