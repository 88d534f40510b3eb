package freshness_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/policy"
)

// A client holding a copy computed 20 minutes ago opens the app while the
// service is overloaded: the app-open rule answers 304 without running
// the handler. An interactive request still runs it.
func ExampleShedder() {
	signer, _ := freshness.NewETagSigner([]byte("a key every instance shares"))
	now := time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC)
	fresh, _ := freshness.New(signer,
		freshness.WithRules(policy.Freshness{Rules: policy.MonzoRules(), Batch: 3}),
		freshness.WithOverload(func() bool { return true }), // e.g. WithOverloadOf(enforcer, queue)
		freshness.WithClock(func() time.Time { return now }))
	runs := 0
	h := fresh.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		fmt.Fprint(w, `{"balance_minor":1250}`)
	}))
	get := func(etag, cause string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/accounts/42/balance", nil)
		r.Header.Set("If-None-Match", etag)
		r.Header.Set(freshness.HeaderCause, cause)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	etag := get("", "").Header().Get("ETag")
	now = now.Add(20 * time.Minute)
	w := get(etag, "app-open")
	fmt.Println(w.Code, w.Header().Get(freshness.HeaderShedRule), "handler runs:", runs)
	w = get(etag, "interactive")
	fmt.Println(w.Code, "handler runs:", runs)
	// Output:
	// 304 app-open-1h handler runs: 1
	// 304 handler runs: 2
}
