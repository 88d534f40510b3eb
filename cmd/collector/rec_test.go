package main

import (
	"testing"

	"github.com/qtop-dev/qtop/meter"
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
