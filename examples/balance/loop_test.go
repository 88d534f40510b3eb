package main

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/collector"
)

// TestRepeatShareThroughTheLoop sends a workload whose repeat share is
// known through the real middleware, reporter and collector: 40 accounts
// each read their balance 10 times, and it changes before reads 0 and 5,
// so 8 reads in 10 repeat the previous answer.
func TestRepeatShareThroughTheLoop(t *testing.T) {
	col, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: filepath.Join(t.TempDir(), "data"), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer col.Shutdown(context.Background())
	srv := httptest.NewServer(col.Handler())
	defer srv.Close()
	app, err := New(Config{Collector: srv.URL, Token: "tok", Sampling: 1, Work: time.Microsecond, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	app.Start()
	h := app.Handler()
	for a := range 40 {
		id := "acct" + string(rune('a'+a%26)) + string(rune('a'+a/26))
		for i := range 10 {
			if i%5 == 0 {
				if w := do(h, http.MethodPost, "/accounts/"+id+"/transactions?amount=100", nil); w.Code != http.StatusNoContent {
					t.Fatalf("deposit: %d %s", w.Code, w.Body)
				}
			}
			if w := do(h, http.MethodGet, "/accounts/"+id+"/balance", nil); w.Code != http.StatusOK {
				t.Fatalf("read: %d %s", w.Code, w.Body)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := app.Shutdown(ctx); err != nil { // sends the last window
		t.Fatal(err)
	}
	v := col.Freshness()
	if len(v.Routes) != 1 {
		t.Fatalf("routes %+v", v.Routes)
	}
	r := v.Routes[0]
	if r.Route != "GET /accounts/{id}/balance" || r.Samples != 400 || r.Repeats != 320 || math.Abs(r.RepeatShare-0.8) > 1e-12 || r.Requests != 400 {
		t.Fatalf("route %+v, want 400 sampled GETs, 320 repeats (0.8)", r)
	}
}
