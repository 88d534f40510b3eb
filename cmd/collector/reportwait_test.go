package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReportWaitsForTheMinute: a report asked while its last minute is not
// written yet (503 with a short Retry-After, as at hh:00:02) is asked
// again after the wait the collector names, and prints the report; a
// long Retry-After (a full disk, say) fails at once with the reason.
func TestReportWaitsForTheMinute(t *testing.T) {
	var waited []time.Duration
	defer func(w func(context.Context, time.Duration) error) { waitRetry = w }(waitRetry)
	waitRetry = func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil }
	asked, retry := 0, "7"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		if asked == 1 {
			w.Header().Set("Retry-After", retry)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"the minute of 2026-12-04T18:59:00Z has ended and is not written yet"}`))
			return
		}
		w.Write([]byte("the report\n"))
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"report", "--collector", srv.URL, "--read-token", "r", "--from", "1h"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.String() != "the report\n" || asked != 2 || len(waited) != 1 || waited[0] != 7*time.Second {
		t.Fatalf("out %q, asked %d times, waited %v", out.String(), asked, waited)
	}
	if !strings.Contains(errb.String(), "not written yet; asking again in 7 s") {
		t.Errorf("stderr: %q", errb.String())
	}
	asked, retry, waited = 0, "600", nil
	out.Reset()
	errb.Reset()
	if code := run([]string{"report", "--collector", srv.URL, "--read-token", "r", "--from", "1h"}, &out, &errb); code != 1 || asked != 1 || waited != nil {
		t.Fatalf("a long Retry-After: exit %d, asked %d times, waited %v", code, asked, waited)
	}
	if !strings.Contains(errb.String(), "(retry in 600 s)") {
		t.Errorf("stderr: %q", errb.String())
	}
}

// TestReportRemoteCSVNote: a CSV has no place for the collector's note
// (the minutes past its retention, or not recorded yet), which a CSV
// asked of a collector lost: it goes to stderr, as one read from the
// store does.
func TestReportRemoteCSVNote(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Qtop-Report-Note", "the minutes before 2026-12-01T00:00:00Z are past the collector's retention")
		w.Write([]byte("tenant,requests\n"))
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"report", "--collector", srv.URL, "--from", "1h", "--format", "csv"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.String() != "tenant,requests\n" || !strings.Contains(errb.String(), "collector report: note: the minutes before 2026-12-01T00:00:00Z are past") {
		t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
	}
}

// TestUnwrittenNote: a report read from the store that ends in a minute
// a running collector may not have written yet says so.
func TestUnwrittenNote(t *testing.T) {
	now := time.Date(2026, 12, 4, 19, 1, 2, 0, time.UTC)
	for _, c := range []struct {
		to   time.Time
		want string
	}{
		{time.Date(2026, 12, 4, 19, 1, 0, 0, time.UTC), "the minutes from 2026-12-04T19:00:00Z may not be in the store yet"},
		{time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC), ""},
	} {
		if got := unwrittenNote(c.to, now); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("to %v: %q, want %q", c.to, got, c.want)
		}
	}
	if got := unwrittenNote(time.Date(2026, 12, 4, 19, 1, 0, 0, time.UTC), now.Add(13*time.Second)); got != "" {
		t.Errorf("at 19:01:15, the 19:00 minute is written: %q", got)
	}
	// --to now at 19:01:15: the report ends at 19:01, whose minutes are
	// written; the minute under way is not the report's.
	if at := now.Add(13 * time.Second); unwrittenNote(at, at) != "" {
		t.Errorf("a report to 19:01:15 at 19:01:15: %q", unwrittenNote(at, at))
	}
}

// TestReportUnauthorizedSaysWhichToken: a 401 from the collector names the
// flag that gives the read token.
func TestReportUnauthorizedSaysWhichToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"unauthorized: this needs the read token (Authorization: Bearer …)"}`))
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"report", "--collector", srv.URL, "--from", "1h"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--read-token-file FILE") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestReportPlainToTLS: --collector without https:// against a collector
// serving TLS says to give https://.
func TestReportPlainToTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	host := srv.Listener.Addr().String()
	var out, errb bytes.Buffer
	if code := run([]string{"report", "--collector", host, "--read-token", "r", "--from", "1h"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "The collector serves TLS: give --collector https://"+host) {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
