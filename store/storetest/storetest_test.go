package storetest_test

import (
	"testing"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// TestExpectUsage checks the reference fold itself on a hand-computed case.
func TestExpectUsage(t *testing.T) {
	a := storetest.Row(0, "w1", "acme", "/a", 10)
	a2 := a
	a2.Version, a2.Count = 2, 30
	db := storetest.Row(0, "w2", "acme", "/b", 99)
	db.Kind, db.DurationSeconds = store.KindDB, 2
	got := storetest.ExpectUsage([]store.Rollup{a2, a, db}, storetest.T0, storetest.T0.Add(60e9), true)
	want := []store.Usage{
		{Tenant: "acme", Route: "/a", Requests: 30, Errors: 1, DurationSeconds: 0.1, RU: 15, Bytes: 1000},
		{Tenant: "acme", Route: "/b", DBSeconds: 2, RU: 148.5, Bytes: 9900},
	}
	storetest.CheckUsage(t, got, want)
}
