package freshness_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/internal/reporttest"
	"github.com/qtop-dev/qtop/report"
)

var dec = report.NewDecoder(freshness.Window{})

func sampleWindow() freshness.Window {
	return freshness.Window{
		Samples: []freshness.Sample{
			{At: time.Unix(0, 1_700_000_000_123_456_789).UTC(), Route: "GET /balance", Caller: 0xfeedface, Response: ^uint64(0)},
			{At: time.Unix(1_700_000_001, 0).UTC(), Route: "GET /balance", Caller: 1, Response: 2},
			{At: time.Unix(1_700_000_002, 0).UTC(), Route: "GET /feed", Caller: 3, Response: 4},
		},
		SamplesDropped: 5,
		Routes:         []freshness.RouteCount{{Route: "GET /balance", Requests: 100, Revalidated: 20}, {Route: "other", Requests: 1}},
		Rules: []freshness.RuleCount{
			{Rule: "push-24h", Route: "GET /balance", Matched: 30, Served: 0, Right: 24, Wrong: 6},
			{Rule: "app-open-1h", Route: "GET /feed", Matched: 9, Served: 9},
		},
	}
}

func TestSectionRoundTrip(t *testing.T) {
	want := sampleWindow()
	r, err := dec.Decode(reporttest.Body(want))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := report.SectionOf[freshness.Window](r); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("freshness: got %+v, want %+v", got, want)
	}
}

func TestSectionBounds(t *testing.T) {
	if _, err := (freshness.Window{Samples: make([]freshness.Sample, freshness.MaxReportSamples+1)}).AppendSection(nil); !errors.Is(err, report.ErrTooLarge) {
		t.Errorf("too many samples: %v", err)
	}
	for name, payload := range map[string][]byte{
		"string count above limit": {0x81, 0x08, 0},
		"forged sample count":      {0, 0xff, 0xff, 0x03},
		"route ref out of table":   {0, 1, 7, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0},
		"truncated sample":         {1, 0, 1, 0, 1},
		"forged rule count":        {0, 0, 0, 0, 0x7f},
		"trailing byte":            {0, 0, 0, 0, 0, 9},
	} {
		r, err := dec.Decode(reporttest.Body(reporttest.Raw{Tag: 3, Payload: payload}))
		if !errors.Is(err, report.ErrMalformed) && !errors.Is(err, report.ErrTooLarge) {
			t.Errorf("%s: %v", name, err)
		}
		if r != nil {
			t.Errorf("%s: a failed decode gave %+v", name, r)
		}
	}
}

func TestSourceDrains(t *testing.T) {
	signer, err := freshness.NewETagSigner([]byte("a key every instance shares"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := freshness.New(signer)
	if err != nil {
		t.Fatal(err)
	}
	if s := freshness.Source(f)(); s != nil {
		t.Errorf("nothing happened, got %+v", s)
	}
}

func FuzzSection(f *testing.F) {
	p, _ := sampleWindow().AppendSection(nil)
	f.Add(p)
	f.Fuzz(func(t *testing.T, p []byte) {
		s := (freshness.Window{}).DecodeSection(report.NewReader(p))
		if s == nil {
			return
		}
		again, err := s.AppendSection(nil)
		if err != nil {
			return // e.g. more distinct strings than the bound once re-interned
		}
		if back := (freshness.Window{}).DecodeSection(report.NewReader(again)); !reflect.DeepEqual(back, s) {
			t.Fatalf("freshness changed: %+v → %+v", s, back)
		}
	})
}
