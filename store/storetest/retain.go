package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
)

// Retention and erasure are checked on the rows WriteAged writes: for
// tenants acme and beta, one rollup, one hot key and one statement at
// each of AgedMinutes, and a policy audit row at the oldest.
var (
	// RetainBefore is the point the checks call Retain with.
	RetainBefore = T0
	// AgedMinutes are the minutes WriteAged writes, oldest first: two
	// days wholly before RetainBefore, a minute of RetainBefore's own day
	// before it (rows a store that drops whole days keeps), RetainBefore
	// itself and a minute after.
	AgedMinutes = []time.Time{T0.Add(-72 * time.Hour), T0.Add(-43 * time.Hour), T0.Add(-time.Hour), T0, T0.Add(time.Hour)}
	// AgedTenants are the tenants WriteAged writes.
	AgedTenants = []string{"acme", "beta"}
)

// Minutes reads back the distinct minutes of a table's rows (statements:
// their time truncated to the minute), oldest first, of one tenant or of
// all when tenant is "". Each store's test reads its own tables.
type Minutes func(table, tenant string) []time.Time

// Tables are the tables retention and erasure clear.
var Tables = []string{"rollups", "hot_keys", "statements"}

// WriteAged writes the rows the retention and erasure checks expect.
func WriteAged(t *testing.T, s store.Store) {
	t.Helper()
	var rs []store.Rollup
	var hs []store.HotKey
	var ss []store.Statement
	for _, m := range AgedMinutes {
		for i, tn := range AgedTenants {
			r := Row(0, "w1", tn, "/r", 10)
			r.Minute = m
			rs = append(rs, r)
			hs = append(hs, store.HotKey{Minute: m, Writer: "w1", Version: 1, Key: tn + ":cart", Tenant: tn, Count: 5, Err: 1})
			ss = append(ss, store.Statement{Time: m.Add(30 * time.Second), Writer: "w1", PID: int32(100 + i), Tenant: tn,
				Route: "/r", Application: "app", Query: "SELECT 1", State: "active", Duration: 2 * time.Second})
		}
	}
	must(t, s.WriteRollups(ctx(t), rs))
	must(t, s.WriteHotKeys(ctx(t), hs))
	must(t, s.WriteStatements(ctx(t), ss))
	must(t, s.WriteAudit(ctx(t), []store.Audit{{Time: AgedMinutes[0], Who: "admin@test", Action: "add", PolicyVersion: 1, Rule: `{"id":"r1"}`}}))
}

// CheckRetain calls Retain(RetainBefore) on the rows of WriteAged and
// checks what is left: every row at or after RetainBefore, none of the
// days wholly before it, and the rows of RetainBefore's own day before it
// only when wholeDays (a store that drops whole partitions). Retain must
// say it removed wantRows rows; it returns what Retain said. A second
// Retain removes nothing more. The audit is kept.
func CheckRetain(t *testing.T, s store.Store, read Minutes, wholeDays bool, wantRows uint64) store.RetainResult {
	t.Helper()
	r, ok := s.(store.Retainer)
	if !ok {
		t.Fatalf("%T is not a store.Retainer", s)
	}
	got, err := r.Retain(ctx(t), RetainBefore)
	must(t, err)
	if got.Rows != wantRows {
		t.Errorf("Retain(%v) = %+v, want %d rows", RetainBefore, got, wantRows)
	}
	var left []time.Time
	for _, m := range AgedMinutes {
		if !m.Before(RetainBefore) || wholeDays && sameDay(m, RetainBefore) {
			left = append(left, m)
		}
	}
	for _, table := range Tables {
		if got := read(table, ""); !slices.Equal(got, left) {
			t.Errorf("%s after Retain(%v): minutes %v, want %v", table, RetainBefore, got, left)
		}
	}
	again, err := r.Retain(ctx(t), RetainBefore)
	must(t, err)
	if again != (store.RetainResult{}) {
		t.Errorf("a second Retain removed %+v, want nothing", again)
	}
	if ar, ok := s.(store.AuditReader); ok {
		a, err := ar.ReadAudit(ctx(t), AgedMinutes[0], RetainBefore)
		must(t, err)
		if len(a) != 1 {
			t.Errorf("audit after Retain: %d rows, want the 1 policy change kept", len(a))
		}
	}
	return got
}

func sameDay(a, b time.Time) bool {
	return a.UTC().Truncate(24 * time.Hour).Equal(b.UTC().Truncate(24 * time.Hour))
}

// CheckErase erases acme from the rows of WriteAged and checks that none
// of its rows is left in any table, every row of beta is, and that the
// store counted what it erased.
func CheckErase(t *testing.T, s store.Store, read Minutes) {
	t.Helper()
	te, ok := s.(store.TenantEraser)
	if !ok {
		t.Fatalf("%T is not a store.TenantEraser", s)
	}
	n := uint64(len(AgedMinutes))
	got, err := te.EraseTenant(ctx(t), "acme")
	must(t, err)
	if want := (store.Erased{Rollups: n, HotKeys: n, Statements: n}); got != want {
		t.Errorf("EraseTenant(acme) = %+v, want %+v", got, want)
	}
	for _, table := range Tables {
		if m := read(table, "acme"); len(m) != 0 {
			t.Errorf("%s still holds acme at %v", table, m)
		}
		if m := read(table, "beta"); !slices.Equal(m, AgedMinutes) {
			t.Errorf("%s: beta at %v, want %v", table, m, AgedMinutes)
		}
	}
	again, err := te.EraseTenant(ctx(t), "acme")
	must(t, err)
	if again.Total() != 0 {
		t.Errorf("a second erasure found %+v", again)
	}
	if u, err := s.Usage(ctx(t), AgedMinutes[0], AgedMinutes[len(AgedMinutes)-1].Add(time.Minute), false); err != nil || len(u) != 1 || u[0].Tenant != "beta" {
		t.Errorf("usage after erasing acme: %+v (%v), want beta's only", u, err)
	}
}
