package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/internal/enforcesim"
	"github.com/qtop-dev/qtop/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func do(h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestBalanceAPI(t *testing.T) {
	forced := policy.Freshness{Rules: policy.MonzoRules(), Batch: 3, Force: true, ForceUntil: time.Now().Add(time.Hour)}
	a, err := New(Config{Work: time.Microsecond, Rules: forced})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	h := a.Handler()
	if w := do(h, "POST", "/accounts/42/transactions?amount=1250", nil); w.Code != http.StatusNoContent {
		t.Fatalf("deposit: %d %s", w.Code, w.Body)
	}
	w := do(h, "GET", "/accounts/42/balance", nil)
	etag := w.Header().Get("ETag")
	if w.Code != 200 || etag == "" || !strings.Contains(w.Body.String(), `"balance_minor":1250`) {
		t.Fatalf("balance: %d %q %s", w.Code, etag, w.Body)
	}
	reads := a.Reads()
	// The forced batch answers an app-open with a copy 0 s old at once.
	w = do(h, "GET", "/accounts/42/balance", map[string]string{"If-None-Match": etag, freshness.HeaderCause: "app-open"})
	if w.Code != 304 || w.Header().Get(freshness.HeaderShedRule) != "app-open-1h" || a.Reads() != reads {
		t.Fatalf("app-open with a fresh copy: %d rule %q, %d reads", w.Code, w.Header().Get(freshness.HeaderShedRule), a.Reads()-reads)
	}
	// Interactive: read, and revalidated.
	w = do(h, "GET", "/accounts/42/balance", map[string]string{"If-None-Match": etag})
	if w.Code != 304 || a.Reads() != reads+1 {
		t.Fatalf("interactive: %d, %d reads", w.Code, a.Reads()-reads)
	}
	for _, bad := range []struct{ method, target string }{
		{"GET", "/accounts/NOPE/balance"},
		{"GET", "/accounts/" + strings.Repeat("a", 40) + "/balance"},
		{"POST", "/accounts/42/transactions?amount=lots"},
		{"POST", "/accounts/42/transactions?amount=99999999999999"},
	} {
		if w := do(h, bad.method, bad.target, nil); w.Code != http.StatusBadRequest {
			t.Errorf("%s %s: %d", bad.method, bad.target, w.Code)
		}
	}
}

func TestReplayModes(t *testing.T) {
	model := enforcesim.DefaultFreshness()
	model.Users, model.Days, model.PushesPerDay, model.ChangesPerDay = 200, 2, 7.5, 3.1
	c := ReplayConfig{Model: model, Users: 60, Span: 3 * time.Hour, Rate: 5000, Slots: 2, Work: 2 * time.Millisecond}
	ctx := context.Background()
	var rows []ReplayResult
	for _, m := range []Mode{ModeOff, ModeShadow, ModeEnforced} {
		r, err := Replay(ctx, c, m)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	off, shadow, enforced := rows[0], rows[1], rows[2]
	var b bytes.Buffer
	WriteReplay(&b, rows)
	t.Log("\n" + b.String())
	if off.Requests == 0 || off.Requests != shadow.Requests || off.Requests != enforced.Requests {
		t.Fatalf("requests %d / %d / %d", off.Requests, shadow.Requests, enforced.Requests)
	}
	if off.Shed != 0 || off.Right+off.Wrong != 0 || shadow.Shed != 0 {
		t.Errorf("no rules or shadow shed: %+v %+v", off, shadow)
	}
	if shadow.Right+shadow.Wrong == 0 || shadow.Precision < 0.5 {
		t.Errorf("shadow precision %v of %d", shadow.Precision, shadow.Right+shadow.Wrong)
	}
	// Sent 2.5 times faster than the backend reads, the process is
	// overloaded, so the enforced rules answer 304s without a read.
	if enforced.Shed == 0 || enforced.Reads+enforced.Shed < uint64(enforced.Answered)-enforced.Revalidated {
		t.Errorf("enforced: %+v", enforced)
	}
}

func TestRunFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"serve", "--batch", "7"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "batch") {
		t.Errorf("--batch 7: %v", err)
	}
	if err := run(context.Background(), []string{"serve", "--etag-key", "zz"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "hex") {
		t.Errorf("bad key: %v", err)
	}
	if err := run(context.Background(), []string{"replay", "--help"}, &out, &errb); err == nil || !strings.Contains(errb.String(), "Examples") {
		t.Errorf("--help: %v %s", err, errb.String())
	}
	if _, err := New(Config{Key: []byte("short")}); err == nil {
		t.Error("short key accepted")
	}
}
