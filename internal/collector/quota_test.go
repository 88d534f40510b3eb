package collector_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestQuotaReply: a quota rule posted as README shows, then two processes'
// reports: each reply lists only the limited tenant, with the process's
// share of the limit (less half of what it and the others would hold above
// it); a duplicate report
// gets the same answer.
func TestQuotaReply(t *testing.T) {
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(), Now: clock, Token: "tok", AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	h := s.Handler()
	for _, rule := range []string{
		`{"tenant":"bigco","action":"quota","ru_per_second":300,"expires":"2026-03-04T12:00:00Z","reason":"plan: 300 RU/s fleet-wide"}`,
		`{"tier":"T3","action":"quota","ru_per_second":1000,"shadow":true,"expires":"2026-03-04T12:00:00Z","reason":"try T3 at 1,000 RU/s"}`,
	} {
		req := httptest.NewRequest(http.MethodPost, api.PathPolicy, bytes.NewReader([]byte(rule)))
		req.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", rule, w.Code, w.Body)
		}
	}
	body := func(instance string, seq uint64, usage []quota.Usage) []byte {
		r := &report.Report{Source: report.Source{Service: "api", Instance: instance}, Seq: seq,
			Start: now.Add(-time.Second), End: now}
		if len(usage) > 0 {
			r.SetSection(quota.Usages(usage))
		}
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send := func(body []byte) []quota.Verdict {
		req := httptest.NewRequest(http.MethodPost, api.PathReports, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", report.ContentType)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("POST report: %d %s", w.Code, w.Body)
		}
		rep, err := report.DecodeReply(w.Body.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		v, err := quota.UnmarshalVerdicts(rep.Quotas)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	calm := quota.Usage{Tenant: "calm", Tier: tenant.T2, Admitted: 50}
	if v := send(body("p1", 1, []quota.Usage{{Tenant: "bigco", Tier: tenant.T2, Admitted: 100}, calm})); len(v) != 0 {
		t.Fatalf("p1 alone (100 of 300 RU/s, under half): %+v, want no verdict", v)
	}
	now = now.Add(10 * time.Millisecond)
	v := send(body("p2", 1, []quota.Usage{{Tenant: "bigco", Tier: tenant.T2, Admitted: 300, Refused: 100},
		{Tenant: "t3co", Tier: tenant.T3, Admitted: 2000}}))
	// bigco: p2's share is 240 (300 × 400/500, rate 0.4), but p1 has no
	// verdict yet and may admit its 100: the two would hold 37 above the
	// limit and its 1 % slack, and p2 gives back half of it. t3co: p2
	// alone, its limit and half the slack, in shadow.
	if len(v) != 2 || v[0].Tenant != "bigco" || v[0].Allowance != 221.5 || v[0].Rate != 0.4 || v[0].Shadow ||
		v[1].Tenant != "t3co" || !v[1].Shadow || v[1].Allowance != 1005 {
		t.Fatalf("p2: %+v, want bigco allowance 221.5, rate 0.4, and a shadow verdict of 1005 for t3co", v)
	}
	// The answer to p2's duplicate is p2's answer again.
	if dup := send(body("p2", 1, nil)); len(dup) != 2 || dup[0] != v[0] {
		t.Fatalf("duplicate: %+v", dup)
	}
	if v := send(body("p1", 2, []quota.Usage{{Tenant: "bigco", Tier: tenant.T2, Admitted: 100}, calm})); len(v) != 1 || v[0].Allowance != 70.75 {
		t.Fatalf("p1 again: %+v, want bigco allowance 70.75 (its share of 60, 300 × 100/500, and half the 21.5 that p2 leaves of the limit and the slack)", v)
	}
}
