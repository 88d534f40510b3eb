package agent

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/qtop-dev/qtop/tenant"
)

// FuzzHandlerTenant: whatever the headers hold, the middleware answers 400
// exactly when they are not valid tags, and otherwise hands the handler
// those tags, with the route of the ServeMux pattern.
func FuzzHandlerTenant(f *testing.F) {
	for _, s := range [][2]string{{"acme", "T1"}, {"", ""}, {"a\x00b", "T2"}, {"acme", "t3"}, {"acme", "T4"}, {"ü", " 0 "}, {"\xff", ""}} {
		f.Add(s[0], s[1])
	}
	a, err := New(WithTenant(FromHeader("X-Tenant", "X-Tier")), WithSlots(0))
	if err != nil {
		f.Fatal(err)
	}
	var got tenant.Tags
	var called bool
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, called = tenant.From(r.Context())
	}))
	f.Fuzz(func(t *testing.T, name, tier string) {
		got, called = tenant.Tags{}, false
		r := httptest.NewRequest("GET", "/products", nil)
		r.Pattern = "GET /products"
		r.Header["X-Tenant"] = []string{name}
		r.Header["X-Tier"] = []string{tier}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		tr, terr := tenant.ParseTier(tier)
		want := tenant.Tags{Tenant: name, Route: "GET /products", Tier: tr}
		valid := terr == nil && name != "" && want.Validate() == nil
		switch {
		case valid && (!called || got != want):
			t.Fatalf("valid %q %q: handler called %v with %+v", name, tier, called, got)
		case !valid && (called || w.Code != http.StatusBadRequest):
			t.Fatalf("invalid %q %q: status %d, handler called %v", name, tier, w.Code, called)
		}
	})
}
