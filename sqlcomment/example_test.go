package sqlcomment_test

import (
	"context"
	"fmt"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

func ExampleAppend() {
	q := sqlcomment.Append("SELECT * FROM reports WHERE id = $1;", map[string]string{
		"tenant": "acme",
		"route":  "GET /reports",
	})
	fmt.Println(q)
	tags, err := sqlcomment.Parse(q)
	fmt.Println(tags["tenant"], tags["route"], err)
	// Output:
	// SELECT * FROM reports WHERE id = $1 /*route='GET%20%2Freports',tenant='acme'*/;
	// acme GET /reports <nil>
}

func ExampleFormat() {
	fmt.Println(sqlcomment.Format(map[string]string{"tenant": "*/ DROP TABLE t; --"}))
	// Output:
	// /*tenant='*%2F%20DROP%20TABLE%20t%3B%20--'*/
}

func ExampleCommenter() {
	c := sqlcomment.NewCommenter(sqlcomment.WithApplication("billing"))
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Tier: tenant.T2})
	fmt.Println(c.Comment(ctx, "UPDATE invoices SET paid = true", false).Query)
	// Output:
	// UPDATE invoices SET paid = true /*application='billing',tenant='acme',tier='T2'*/
}
