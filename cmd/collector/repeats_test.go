package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/internal/collector"
	wire "github.com/qtop-dev/qtop/report"
)

func TestReportRepeats(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"report", "--repeats"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--collector") {
		t.Fatalf("--repeats without --collector: exit %d, %q", code, errb.String())
	}
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	s, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: filepath.Join(t.TempDir(), "data"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	// Caller 1 gets the same balance 4 times, caller 2 a new one each time:
	// 3 repeats of 8 GETs.
	fr := &freshness.Window{}
	for i := range 4 {
		at := now.Add(time.Duration(i-4) * time.Hour)
		fr.Samples = append(fr.Samples, freshness.Sample{At: at, Route: "GET /balance", Caller: 1, Response: 10},
			freshness.Sample{At: at, Route: "GET /balance", Caller: 2, Response: uint64(20 + i)})
	}
	rep := &wire.Report{Source: wire.Source{Service: "b", Instance: "i"}, Seq: 1, Start: now.Add(-time.Second), End: now}
	rep.SetSection(*fr)
	if _, err := s.Consume(context.Background(), rep, nil); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"report", "--repeats", "--collector", srv.Listener.Addr().String(), "--format", "csv"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "GET /balance,8,3,0.3750") {
		t.Fatalf("repeats csv:\n%s", out.String())
	}
}
