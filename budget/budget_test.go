package budget_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/internal/reporttest"
	"github.com/qtop-dev/qtop/report"
)

var dec = report.NewDecoder(budget.Window{})

func TestSectionRoundTrip(t *testing.T) {
	w := budget.Window{
		Counters: []budget.Counter{
			{ID: "analytics", Enforce: true, Admitted: 10, Refused: 3, Warned: 0, InTx: 1},
			{ID: "long", Runaway: true, Cancelled: 2, Reported: 1, WatchRefused: 5},
		},
		Actions: []budget.Action{{Time: time.UnixMilli(1764579600123).UTC(), Rule: "long", Outcome: "cancelled",
			Duration: 30 * time.Second, Shape: 0xdeadbeefcafe}},
	}
	r, err := dec.Decode(reporttest.Body(w))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := report.SectionOf[budget.Window](r); !ok || !reflect.DeepEqual(got, w) {
		t.Fatalf("budgets = %+v, want %+v", got, w)
	}
	if _, err := (budget.Window{Actions: make([]budget.Action, budget.MaxActions+1)}).AppendSection(nil); !errors.Is(err, report.ErrTooLarge) {
		t.Fatalf("too many actions: %v", err)
	}
	if _, err := (budget.Window{Counters: make([]budget.Counter, budget.MaxCounters+1)}).AppendSection(nil); !errors.Is(err, report.ErrTooLarge) {
		t.Fatalf("too many counters: %v", err)
	}
}

func TestSectionMalformed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		want    error
	}{
		{"count above the limit", []byte{0x81, 0x04, 0}, report.ErrTooLarge},
		{"count above the bytes left", []byte{5, 0}, report.ErrMalformed},
		{"bad flags", []byte{1, 1, 'a', 4, 0, 0, 0, 0, 0, 0, 0}, report.ErrMalformed},
		{"truncated", []byte{1, 1, 'a', 0, 0}, report.ErrMalformed},
		{"no action count", []byte{1, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0}, report.ErrMalformed},
		{"actions above the limit", []byte{1, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 65}, report.ErrTooLarge},
		{"trailing", []byte{1, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, report.ErrMalformed},
		{"long outcome", append([]byte{0, 1, 0, 0, 17}, append([]byte("xxxxxxxxxxxxxxxxx"), 0, 0, 0, 0, 0, 0, 0, 0, 0)...), report.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := dec.Decode(reporttest.Body(reporttest.Raw{Tag: 4, Payload: tc.payload}))
			if !errors.Is(err, tc.want) || r != nil {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	r, err := dec.Decode(reporttest.Body(reporttest.Raw{Tag: 4, Payload: []byte{1, 1, 'a', 2, 1, 2, 3, 4, 5, 6, 7, 0}}))
	if err != nil {
		t.Fatal(err)
	}
	want := []budget.Counter{{ID: "a", Enforce: true, Admitted: 1, Refused: 2, Warned: 3, InTx: 4, Cancelled: 5, Reported: 6, WatchRefused: 7}}
	if got, _ := report.SectionOf[budget.Window](r); !reflect.DeepEqual(got.Counters, want) {
		t.Fatalf("budgets = %+v", got)
	}
}

func TestCounterSince(t *testing.T) {
	a := budget.Counter{ID: "x", Admitted: 5, Refused: 2}
	if got := a.Since(budget.Counter{ID: "x", Admitted: 3, Refused: 1}); got != (budget.Counter{ID: "x", Admitted: 2, Refused: 1}) {
		t.Errorf("since = %+v", got)
	}
	if got := a.Since(budget.Counter{ID: "x", Admitted: 9}); got != a {
		t.Errorf("a counter went down (set anew): %+v, want %+v", got, a)
	}
}

func FuzzSection(f *testing.F) {
	f.Add([]byte{1, 1, 'a', 2, 1, 2, 3, 4, 5, 6, 7, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		s := (budget.Window{}).DecodeSection(report.NewReader(p))
		if s == nil {
			return
		}
		if _, err := s.AppendSection(nil); err != nil {
			t.Fatalf("decoded section does not encode: %v", err)
		}
	})
}
