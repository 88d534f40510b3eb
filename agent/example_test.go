package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/ru"
)

func Example() {
	a, err := agent.New(
		agent.WithService("shop"),
		agent.WithTenant(agent.FromHeader("X-Tenant", "")),
		// 10 RU/s for everyone: the third 6-RU write in a row is refused.
		agent.WithPlans(map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 10, Burst: 10}, Weight: 1}}, nil),
		// Priced by operation only (read 1, write 6), so that the example's
		// figures do not depend on the machine's speed.
		agent.WithCostModel(ru.Model{Base: ru.DefaultModel().Base}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Shutdown(context.Background())

	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	h := a.Handler(mux)
	for range 3 {
		req := httptest.NewRequest("POST", "/orders", nil)
		req.Header.Set("X-Tenant", "acme")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Println(w.Code, "retry after", ra, "s")
		} else {
			fmt.Println(w.Code)
		}
	}
	for _, row := range a.Recorder().Cut(time.Now()).Rows {
		fmt.Printf("%s %s %s: %d requests, %.0f RU\n", row.Tenant, row.Route, row.Tier, row.Count, row.RU)
	}
	s := a.Enforcer().Stats().Tiers[2]
	fmt.Println("admitted", s.Admitted, "throttled", s.Throttled)
	// Output:
	// 200
	// 200
	// 429 retry after 1 s
	// acme POST /orders T2: 3 requests, 12 RU
	// admitted 2 throttled 1
}
