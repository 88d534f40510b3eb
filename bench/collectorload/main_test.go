package main

import (
	"testing"
	"time"

	wire "github.com/qtop-dev/qtop/report"
)

// TestReportsStampedWhenSent: every report of a run is stamped with the
// window that ends when it is sent, not when it was encoded, so a run of
// three minutes puts its load in those three minutes.
func TestReportsStampedWhenSent(t *testing.T) {
	start := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	s := schedule{start: start, interval: time.Minute, phase: []time.Duration{0, 30 * time.Second}}
	bodies := encodeFleet("t", s, 2, 3)
	for i, bs := range bodies {
		if len(bs) != 3 {
			t.Fatalf("process %d: %d reports, want 3", i, len(bs))
		}
		for k, b := range bs {
			var r wire.Report
			if err := r.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			end := start.Add(s.phase[i] + time.Duration(k)*time.Minute)
			if !r.End.Equal(end) || !r.Start.Equal(end.Add(-time.Minute)) || r.Seq != uint64(k+1) {
				t.Errorf("process %d report %d: seq %d window [%v, %v), want seq %d window [%v, %v)",
					i, k, r.Seq, r.Start, r.End, k+1, end.Add(-time.Minute), end)
			}
		}
	}
}
