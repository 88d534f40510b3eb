package agent

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/qtop-dev/qtop/enforce"
)

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkHandler is the agent's own cost per request: tenant from
// headers, shed → CoDel → bucket, charge and record, around a handler that
// writes three bytes. bench/ sets the whole request, SQL included, against
// otelhttp + otelsql.
func BenchmarkHandler(b *testing.B) {
	a, err := New(WithTenant(FromHeader("X-Tenant", "X-Tier")),
		WithPlans(map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1e12, Burst: 1e12}, Weight: 1}}, nil))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Shutdown(b.Context())
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }))
	req := httptest.NewRequest("GET", "/x", nil)
	req.Header.Set("X-Tenant", "acme")
	req.Header.Set("X-Tier", "T2")
	w := &nopWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}
