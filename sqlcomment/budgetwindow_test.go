package sqlcomment

import (
	"errors"
	"reflect"
	"testing"
	"time"

	budgetsec "github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

func TestBudgetsWindowSource(t *testing.T) {
	b := NewBudgets()
	if err := b.Set([]policy.Budget{{ID: "c", Concurrency: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "t"}},
		[]policy.Runaway{{ID: "r", AfterSeconds: 1, Action: policy.Report, Reason: "t"}}); err != nil {
		t.Fatal(err)
	}
	src := b.WindowSource()
	// The first window says the process applies budgets, with nothing in
	// it; then quiet windows send nothing.
	if s, ok := src().(budgetsec.Window); !ok || !s.Empty() {
		t.Fatalf("first window %+v, want an empty one", s)
	}
	if s := src(); s != nil {
		t.Fatalf("nothing happened, got %+v", s)
	}
	c := NewCommenter(WithBudgets(b))
	st := Statement{Tags: tenant.Tags{Tenant: "a"}, Tagged: true}
	t0 := time.Unix(1e9, 0)
	tk, err := c.Admit(t0, "SELECT 1", &st, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(t0, "SELECT 1", &st, false); !errors.Is(err, ErrBudget) {
		t.Fatal(err)
	}
	c.Finish(&tk, t0.Add(2*time.Second), 2*time.Second, false)
	want := []budgetsec.Counter{{ID: "c", Enforce: true, Admitted: 1, Refused: 1}, {ID: "r", Runaway: true, Reported: 1}}
	w, _ := src().(budgetsec.Window)
	got, acts := w.Counters, w.Actions
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("window 1 = %+v, want %+v", got, want)
	}
	if len(acts) != 1 || acts[0].Rule != "r" || acts[0].Outcome != "reported" || acts[0].Duration != 2*time.Second {
		t.Fatalf("window 1 actions = %+v", acts)
	}
	// Quiet from here: nothing for WindowHeartbeat-1 windows, then an
	// empty one, so that the collector keeps counting the process.
	for i := 2; i <= WindowHeartbeat; i++ {
		if s := src(); s != nil {
			t.Fatalf("window %d = %+v, want nothing", i, s)
		}
	}
	if s, ok := src().(budgetsec.Window); !ok || !s.Empty() {
		t.Fatalf("window %d = %+v, want an empty one", WindowHeartbeat+1, s)
	}
	if s := src(); s != nil {
		t.Fatalf("after the heartbeat: %+v", s)
	}
}
