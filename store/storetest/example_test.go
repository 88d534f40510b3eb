package storetest_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// ExpectUsage is the reference every store is checked against: the newest
// version of each row, summed across writers.
func ExampleExpectUsage() {
	a := storetest.Row(0, "collector-1", "acme", "GET /", 10)
	b := storetest.Row(0, "collector-2", "acme", "GET /", 5)
	retry := a
	late := a
	late.Version, late.Count = 2, 11
	u := storetest.ExpectUsage([]store.Rollup{a, b, retry, late}, storetest.T0, storetest.T0.Add(time.Hour), false)
	fmt.Println(u[0].Tenant, u[0].Requests)
	// Output:
	// acme 16
}
