package collector

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// TestLateReportsNotLive: a report that waited lateAfter or more at its
// reporter (report.AgeHeader: a backlog sent when the collector is back)
// counts in its minute but not in the live view's current second, where
// it would be a false spike; one that waited less (a retry) is live; an
// age that is not whole milliseconds is refused.
func TestLateReportsNotLive(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RefusalDelay = -1 })
	defer f.stop()
	h := f.s.Handler()
	post := func(body []byte, age string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, api.PathReports, bytes.NewReader(body))
		req.Header.Set("Content-Type", report.ContentType)
		req.Header.Set("Authorization", "Bearer "+f.token)
		if age != "" {
			req.Header.Set(report.AgeHeader, age)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	f.clk.Add(time.Second)
	backlog := newProcess(f.clk, "api", "a1")
	retried := newProcess(f.clk, "api", "b1")
	fresh := newProcess(f.clk, "api", "c1")
	for _, c := range []struct {
		p      *process
		tenant string
		age    string
	}{{backlog, "acme", "3000"}, {retried, "globex", "2999"}, {fresh, "initech", ""}} {
		if w := post(c.p.report(t, c.tenant, 30, ""), c.age); w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.tenant, w.Code, w.Body)
		}
	}
	for _, bad := range []string{"-5", "1.5", "abc", "99999999999"} {
		if w := post(fresh.report(t, "initech", 1, ""), bad); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "whole milliseconds") {
			t.Errorf("age %q: %d %s", bad, w.Code, w.Body)
		}
	}
	if got := testutil.ToFloat64(f.s.met.late); got != 1 {
		t.Fatalf("late reports: %v, want 1", got)
	}
	now := f.clk.Add(time.Second)
	live := map[string]float64{}
	for _, r := range f.s.Snapshot(now, api.MeasureRU, 20).Tenants {
		live[r.Tenant] = r.RUPerSec
	}
	if live["acme"] != 0 || live["globex"] != 3 || live["initech"] != 3 {
		t.Fatalf("live RU/s %v: want acme 0 (late), globex and initech 3", live)
	}
	// The minute holds all three.
	at := time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC)
	f.clk.Set(at)
	f.s.Tick(context.Background(), at)
	for _, tn := range []string{"acme", "globex", "initech"} {
		if got := f.mem.sum(tn, "request", ru); got != 30 {
			t.Errorf("%s in its minute: %v RU, want 30", tn, got)
		}
	}
}
