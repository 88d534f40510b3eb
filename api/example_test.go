package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/qtop-dev/qtop/api"
)

func ExampleClient_Get() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.Snapshot{Measure: r.URL.Query().Get("by"), Tenants: []api.TenantRow{
			{Tenant: "bigcorp", RUPerSec: 900, Share: 0.9},
			{Tenant: api.OtherTenant, RUPerSec: 100, Share: 0.1},
		}})
	}))
	defer srv.Close()

	c, _ := api.NewClient(srv.URL, api.WithMeasure(api.MeasureRU))
	s, err := c.Get(context.Background())
	if err != nil {
		panic(err)
	}
	for _, t := range s.Tenants {
		fmt.Printf("%s %.0f RU/s %.0f%%\n", t.Tenant, t.RUPerSec, 100*t.Share)
	}
	// Output:
	// bigcorp 900 RU/s 90%
	// other 100 RU/s 10%
}
