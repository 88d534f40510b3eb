package meter

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

func TestBudgetsSectionRoundTrip(t *testing.T) {
	r := docReport()
	r.Budgets = []BudgetCounter{
		{ID: "analytics", Enforce: true, Admitted: 10, Refused: 3, Warned: 0, InTx: 1},
		{ID: "long", Runaway: true, Cancelled: 2, Reported: 1, WatchRefused: 5},
	}
	r.BudgetActions = []BudgetAction{{Time: time.UnixMilli(1764579600123).UTC(), Rule: "long", Outcome: "cancelled",
		Duration: 30 * time.Second, Shape: 0xdeadbeefcafe}}
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeReport(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Budgets, r.Budgets) || !reflect.DeepEqual(got.BudgetActions, r.BudgetActions) {
		t.Fatalf("budgets = %+v %+v, want %+v %+v", got.Budgets, got.BudgetActions, r.Budgets, r.BudgetActions)
	}
	r.BudgetActions = make([]BudgetAction, MaxBudgetActions+1)
	if _, err := r.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too many actions: %v", err)
	}
	r.BudgetActions = nil
	r.Budgets = make([]BudgetCounter, MaxBudgetCounters+1)
	if _, err := r.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too many counters: %v", err)
	}
}

func TestBudgetsSectionMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail []byte
		want error
	}{
		{"count above the limit", []byte{1, 4, 3, 0x81, 0x04, 0}, ErrTooLarge},
		{"count above the bytes left", []byte{1, 4, 2, 5, 0}, ErrMalformed},
		{"bad flags", []byte{1, 4, 11, 1, 1, 'a', 4, 0, 0, 0, 0, 0, 0, 0}, ErrMalformed},
		{"truncated", []byte{1, 4, 5, 1, 1, 'a', 0, 0}, ErrMalformed},
		{"no action count", []byte{1, 4, 11, 1, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0}, ErrMalformed},
		{"actions above the limit", []byte{1, 4, 12, 1, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 65}, ErrTooLarge},
		{"trailing", []byte{1, 4, 13, 1, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, ErrMalformed},
		{"long outcome", append([]byte{1, 4, 31, 0, 1, 0, 0, 17}, append([]byte("xxxxxxxxxxxxxxxxx"), 0, 0, 0, 0, 0, 0, 0, 0, 0)...), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Report
			if err := r.UnmarshalBinary(withSections(t, tc.tail)); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if r.Budgets != nil {
				t.Fatal("a failed decode left budgets")
			}
		})
	}
	var r Report
	if err := r.UnmarshalBinary(withSections(t, []byte{1, 4, 12, 1, 1, 'a', 2, 1, 2, 3, 4, 5, 6, 7, 0})); err != nil {
		t.Fatal(err)
	}
	want := []BudgetCounter{{ID: "a", Enforce: true, Admitted: 1, Refused: 2, Warned: 3, InTx: 4, Cancelled: 5, Reported: 6, WatchRefused: 7}}
	if !reflect.DeepEqual(r.Budgets, want) {
		t.Fatalf("budgets = %+v", r.Budgets)
	}
}

func TestBudgetSource(t *testing.T) {
	b := sqlcomment.NewBudgets()
	if err := b.Set([]policy.Budget{{ID: "c", Concurrency: 1, Mode: policy.Enforce, Reason: "t"}},
		[]policy.Runaway{{ID: "r", AfterSeconds: 1, Action: policy.Report, Reason: "t"}}); err != nil {
		t.Fatal(err)
	}
	src := BudgetSource(b)
	if got, acts := src(); len(got) != 0 || len(acts) != 0 {
		t.Fatalf("nothing happened, got %+v %+v", got, acts)
	}
	c := sqlcomment.NewCommenter(sqlcomment.WithBudgets(b))
	st := sqlcomment.Statement{Tags: tenant.Tags{Tenant: "a"}, Tagged: true}
	t0 := time.Unix(1e9, 0)
	tk, err := c.Admit(t0, "SELECT 1", &st, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(t0, "SELECT 1", &st, false); !errors.Is(err, sqlcomment.ErrBudget) {
		t.Fatal(err)
	}
	c.Finish(&tk, t0.Add(2*time.Second), 2*time.Second, false)
	want := []BudgetCounter{{ID: "c", Enforce: true, Admitted: 1, Refused: 1}, {ID: "r", Runaway: true, Reported: 1}}
	got, acts := src()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("window 1 = %+v, want %+v", got, want)
	}
	if len(acts) != 1 || acts[0].Rule != "r" || acts[0].Outcome != "reported" || acts[0].Duration != 2*time.Second {
		t.Fatalf("window 1 actions = %+v", acts)
	}
	if got, acts := src(); len(got) != 0 || len(acts) != 0 {
		t.Fatalf("window 2 = %+v %+v, want nothing", got, acts)
	}
}
