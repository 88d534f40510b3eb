package gate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/gate"
)

// A gate in front of a service: the tenant comes from X-Tenant and reaches
// the service as W3C baggage.
func Example() {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, baggage %q", r.Header.Get("Baggage"))
	}))
	defer svc.Close()

	a, err := agent.New(agent.WithService("shop-node"), agent.WithTenant(agent.FromHeader("X-Tenant", "")))
	if err != nil {
		panic(err)
	}
	up, _ := url.Parse(svc.URL)
	g, err := gate.New(a, gate.Config{Upstream: up})
	if err != nil {
		panic(err)
	}
	defer g.Shutdown(context.Background())

	front := httptest.NewServer(g) // or g.Serve(listener)
	defer front.Close()
	req, _ := http.NewRequest(http.MethodGet, front.URL+"/products", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 hello, baggage "tenant.id=acme"
}
