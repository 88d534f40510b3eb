package main

import (
	"context"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/meter"
	wire "github.com/qtop-dev/qtop/report"
)

// newRec returns a recorder or fails the test.
func newRec(t testing.TB, opts ...meter.RecorderOption) *meter.Recorder {
	t.Helper()
	rec, err := meter.NewRecorder(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// consume records recs as process p of service api at *now, moves *now
// (the test's clock, which s may read too) a second on, and has s take
// the report cut then.
func consume(t testing.TB, s *collector.Server, now *time.Time, recs ...meter.Record) {
	t.Helper()
	rec := newRec(t, meter.WithSource(wire.Source{Service: "api", Instance: "p"}), meter.WithClock(func() time.Time { return *now }))
	for _, r := range recs {
		rec.Record(r)
	}
	*now = now.Add(time.Second)
	if _, err := s.Consume(context.Background(), rec.Cut(*now), nil); err != nil {
		t.Fatal(err)
	}
}
