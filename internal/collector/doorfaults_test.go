package collector

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// The report door names what was wrong with a body it cannot take: a
// Content-Encoding (a report compresses its payload itself) is 415, an
// empty body says so, a body that stopped arriving is 408 and one cut
// short 400, neither with the connection's addresses in it.
func TestReportDoorBodyFaults(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	p := newProcess(f.clk, "api", "p1")
	body := p.report(t, "acme", 1, "")
	if w := postReport(h, body, "Content-Encoding", "gzip"); w.Code != http.StatusUnsupportedMediaType || !strings.Contains(w.Body.String(), "Content-Encoding") {
		t.Fatalf("gzip: %d %s", w.Code, w.Body)
	}
	if w := postReport(h, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "empty body") {
		t.Fatalf("empty: %d %s", w.Code, w.Body)
	}
	for _, tc := range []struct {
		err  error
		code int
		want string
	}{
		{os.ErrDeadlineExceeded, http.StatusRequestTimeout, "did not arrive in time"},
		{io.ErrUnexpectedEOF, http.StatusBadRequest, "cut short"},
	} {
		req := httptest.NewRequest(http.MethodPost, api.PathReports, &failingBody{head: body[:10], err: tc.err})
		req.Header.Set("Content-Type", report.ContentType)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) || strings.Contains(w.Body.String(), "127.0.0.1") {
			t.Fatalf("%v: %d %s, want %d saying %q", tc.err, w.Code, w.Body, tc.code, tc.want)
		}
	}
	if w := postReport(h, body, "Content-Encoding", "identity"); w.Code != http.StatusOK {
		t.Fatalf("identity: %d %s", w.Code, w.Body)
	}
}
