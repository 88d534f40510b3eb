package tenant_test

import (
	"context"
	"fmt"
	"strings"

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

// A door that cannot refuse a span or a session names a bad tenant by its
// stand-in: two names too long, the same for their first 128 bytes, stay
// two tenants.
func ExampleSubstitute() {
	long := strings.Repeat("x", 200)
	for _, name := range []string{"acme", long + "1", long + "2", "line\nbreak"} {
		s, substituted := tenant.Substitute(name)
		fmt.Println(s, substituted)
	}
	// Output:
	// acme false
	// xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…#39610fa23ec31bad true
	// xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…#f80d7d1f47aa9d6b true
	// line\x0abreak#697affca60d5d0dc true
}
