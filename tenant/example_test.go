package tenant_test

import (
	"context"
	"fmt"

	"github.com/qtop-dev/qtop/tenant"
)

func Example() {
	// At the edge, after authentication:
	tags := tenant.Tags{Tenant: "acme", Route: "GET /reports", Tier: tenant.T2}
	if err := tags.Validate(); err != nil {
		fmt.Println("reject:", err)
		return
	}
	ctx := tenant.With(context.Background(), tags)

	// Anywhere below:
	if t, ok := tenant.From(ctx); ok {
		fmt.Println(t.Tenant, t.Route, t.Tier)
	}

	bad := tenant.Tags{Tenant: "acme\n"}
	fmt.Println(bad.Validate())
	// Output:
	// acme GET /reports T2
	// tenant: value has a non-printable character: tenant has U+000A at byte 4
}
