package main

import (
	"testing"

	"github.com/qtop-dev/qtop/ingest"
)

// newRec returns a recorder or fails the test.
func newRec(t testing.TB, opts ...ingest.RecorderOption) *ingest.Recorder {
	t.Helper()
	rec, err := ingest.NewRecorder(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
