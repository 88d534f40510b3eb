package report_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// A report carries the sections of the features a process runs; a
// decoder built with the section types it knows gives them back typed,
// and skips the others.
func Example() {
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	r := &report.Report{Source: report.Source{Service: "api", Instance: "i1"}, Seq: 1, Start: t0, End: t0.Add(time.Second),
		Rows: []report.Row{{Tenant: "acme", Route: "GET /a", Tier: tenant.T2, Count: 3, Duration: 30 * time.Millisecond}}}
	r.SetSection(quota.Usages{{Tenant: "acme", Admitted: 12}})
	body, err := r.MarshalBinary()
	if err != nil {
		panic(err)
	}

	got, err := report.NewDecoder(quota.Usages(nil)).Decode(body)
	if err != nil {
		panic(err)
	}
	usage, _ := report.SectionOf[quota.Usages](got)
	fmt.Println(got.Rows[0].Tenant, got.Rows[0].Count, usage[0].Admitted)

	plain, _ := report.Decode(body) // knows no quota section: skipped
	_, ok := report.SectionOf[quota.Usages](plain)
	fmt.Println(len(plain.Rows), ok)
	// Output:
	// acme 3 12
	// 1 false
}
