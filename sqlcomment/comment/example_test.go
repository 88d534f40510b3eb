package comment_test

import (
	"fmt"

	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/tenant"
)

// The session tag a wrapper in ModeSession puts in application_name, and
// what the pgactivity sampler reads back from it.
func ExampleApplicationName() {
	name := comment.ApplicationName("billing", tenant.Tags{Tenant: "acme", Tier: tenant.T2})
	fmt.Println(name)
	a, ok := comment.ParseApplicationName(name)
	fmt.Println(a.Service, a.Tenant, a.Tier, ok)
	long := comment.ApplicationName("billing", tenant.Tags{Tenant: "Ünïcödé GmbH & Co. KG, Zweigniederlassung Süd"})
	fmt.Println(long, len(long))
	// Output:
	// billing|t=acme|T2
	// billing acme T2 true
	// billing|t=~slitdjc37uq5 23
}
