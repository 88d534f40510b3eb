package policy

import "fmt"

func ExampleBudget_Limits() {
	b := Budget{ID: "per-tenant", Each: "tenant", Share: 0.5, CapacitySeconds: 2, MaxStatementSeconds: 5, Concurrency: 4}
	r := Runaway{ID: "long", AfterSeconds: 120, CooldownSeconds: 0.5, Action: Cancel}
	fmt.Println(b.Limits())
	fmt.Println(r.Limits())
	// Output:
	// share 0.5/2s, stmt 5s, conc 4
	// after 2m, watch 0.5s
}
