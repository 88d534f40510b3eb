package meter

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

func freshReport() *Report {
	r := docReport()
	r.Freshness = &Freshness{
		Samples: []FreshSample{
			{At: time.Unix(0, 1_700_000_000_123_456_789).UTC(), Route: "GET /balance", Caller: 0xfeedface, Response: ^uint64(0)},
			{At: time.Unix(1_700_000_001, 0).UTC(), Route: "GET /balance", Caller: 1, Response: 2},
			{At: time.Unix(1_700_000_002, 0).UTC(), Route: "GET /feed", Caller: 3, Response: 4},
		},
		SamplesDropped: 5,
		Routes:         []FreshRoute{{Route: "GET /balance", Requests: 100, Revalidated: 20}, {Route: "other", Requests: 1}},
		Rules: []FreshRule{
			{Rule: "push-24h", Route: "GET /balance", Matched: 30, Served: 0, Right: 24, Wrong: 6},
			{Rule: "app-open-1h", Route: "GET /feed", Matched: 9, Served: 9},
		},
	}
	return r
}

func TestFreshnessSectionRoundTrip(t *testing.T) {
	want := freshReport()
	for _, enc := range []func(*Report) ([]byte, error){(*Report).MarshalBinary, (*Report).marshalUncompressed} {
		b, err := enc(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeReport(b)
		if err != nil {
			t.Fatal(err)
		}
		sameReport(t, want, got)
		if !reflect.DeepEqual(got.Freshness, want.Freshness) {
			t.Fatalf("freshness: got %+v, want %+v", got.Freshness, want.Freshness)
		}
	}
	// An empty one is not written: the report ends as before.
	r := docReport()
	r.Freshness = &Freshness{}
	a, _ := r.marshalUncompressed()
	b, _ := docReport().marshalUncompressed()
	if string(a) != string(b) {
		t.Error("an empty freshness section changed the encoding")
	}
	if got, _ := DecodeReport(a); got.Freshness != nil {
		t.Error("an absent section decoded as present")
	}
}

func TestFreshnessSectionBounds(t *testing.T) {
	r := docReport()
	r.Freshness = &Freshness{Samples: make([]FreshSample, MaxFreshSamples+1)}
	if _, err := r.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too many samples: %v", err)
	}
	for name, tail := range map[string][]byte{
		// 1 section, tag 3, payload:
		"string count above limit": {1, 3, 3, 0x81, 0x08, 0},
		"forged sample count":      {1, 3, 4, 0, 0xff, 0xff, 0x03},
		"route ref out of table":   {1, 3, 20, 0, 1, 7, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0},
		"truncated sample":         {1, 3, 5, 1, 0, 1, 0, 1},
		"forged rule count":        {1, 3, 5, 0, 0, 0, 0, 0x7f},
		"trailing byte":            {1, 3, 6, 0, 0, 0, 0, 0, 9},
	} {
		var got Report
		err := got.UnmarshalBinary(withSections(t, tail))
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v", name, err)
		}
		if got.Freshness != nil || len(got.Rows) != 0 {
			t.Errorf("%s: a failed decode left %+v", name, got.Freshness)
		}
	}
}

func TestReporterSendsFreshness(t *testing.T) {
	c := newCollector(t)
	rec := mustRecorder(WithSource(Source{Service: "api", Instance: "i-f"}))
	calls := 0
	r := newReporter(t, c, rec, WithFreshnessSource(func() *Freshness {
		calls++
		if calls > 1 {
			return nil
		}
		return freshReport().Freshness
	}))
	rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Duration: time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	reps := c.got()
	if len(reps) < 2 || reps[0].Freshness == nil || len(reps[0].Freshness.Samples) != 3 || reps[1].Freshness != nil {
		t.Fatalf("reports %+v", reps)
	}
}

func FuzzFreshnessSection(f *testing.F) {
	b, _ := freshReport().marshalUncompressed()
	f.Add(b)
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Report
		if err := r.UnmarshalBinary(body); err != nil {
			return
		}
		again, err := r.marshalUncompressed()
		if err != nil {
			return
		}
		var r2 Report
		if err := r2.UnmarshalBinary(again); err != nil {
			t.Fatalf("re-encoded report does not decode: %v", err)
		}
		if !reflect.DeepEqual(r.Freshness, r2.Freshness) {
			t.Fatalf("freshness changed: %+v → %+v", r.Freshness, r2.Freshness)
		}
	})
}
