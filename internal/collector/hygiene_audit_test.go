package collector

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/store"
)

// TestHygieneAuditLimit: GET /v1/audit returns the newest 1000 rows of
// its range unless limit says otherwise (at most 10000), and says in a
// header when it left rows out.
func TestHygieneAuditLimit(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	now := f.clk.Now()
	f.mem.mu.Lock()
	for i := range 1500 {
		f.mem.audit = append(f.mem.audit, store.Audit{Time: now.Add(-time.Hour + time.Duration(i)*time.Second),
			Who: "test", Action: "add", PolicyVersion: uint64(i + 1), Rule: `{}`})
	}
	f.mem.mu.Unlock()
	get := func(q string) ([]api.AuditRow, string, int) {
		w := hygieneDo(h, http.MethodGet, api.PathAudit+q, f.token, nil)
		var rows []api.AuditRow
		if w.Code == http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), &rows); err != nil {
				t.Fatal(err)
			}
		}
		return rows, w.Header().Get(AuditTruncatedHeader), w.Code
	}
	rows, trunc, code := get("")
	if code != 200 || len(rows) != 1000 || rows[0].PolicyVersion != 501 || rows[999].PolicyVersion != 1500 {
		t.Fatalf("default: %d, %d rows", code, len(rows))
	}
	if !strings.Contains(trunc, "newest 1000 of 1500 rows") {
		t.Errorf("default: header %q", trunc)
	}
	rows, trunc, code = get("?limit=10")
	if code != 200 || len(rows) != 10 || rows[9].PolicyVersion != 1500 || !strings.Contains(trunc, "newest 10 of 1500") {
		t.Errorf("limit=10: %d, %d rows, header %q", code, len(rows), trunc)
	}
	rows, trunc, code = get("?limit=10000")
	if code != 200 || len(rows) != 1500 || trunc != "" {
		t.Errorf("limit=10000: %d, %d rows, header %q", code, len(rows), trunc)
	}
	for _, bad := range []string{"0", "-1", "10001", "all"} {
		if _, _, code := get("?limit=" + bad); code != http.StatusBadRequest {
			t.Errorf("limit=%s: %d, want 400", bad, code)
		}
	}
}
