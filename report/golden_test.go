package report_test

import (
	"bytes"
	"encoding/hex"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

// The golden bodies of testdata/ were written by the encoder this package
// replaced (package meter's, before the wire contract moved here): version
// 1, and version 2 with every section, plain and zstd. Each must decode
// and encode again to the same bytes.

var full = report.NewDecoder(quota.Usages(nil), freshness.Window{}, budget.Window{})

func golden(t *testing.T, name string) []byte {
	t.Helper()
	return report.ReadHexDump(t, filepath.Join("testdata", name))
}

func TestGoldenSectionsRoundTrip(t *testing.T) {
	want := golden(t, "report-v2-sections.hex")
	r, err := full.Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.MarshalUncompressed()
	if err != nil {
		t.Fatal(err)
	}
	if got = withSeedOf(t, got, want); !bytes.Equal(got, want) {
		t.Fatalf("re-encoded:\n%s\nwant:\n%s", hex.Dump(got), hex.Dump(want))
	}
	// Every section decoded to what the old encoder was given.
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	if d, ok := report.SectionOf[report.EnforcementDetail](r); !ok || d.Dropped != [4]uint64{0, 0, 3, 9} ||
		!reflect.DeepEqual(d.PoolWait, []report.PoolWait{{Tenant: "acme", Count: 3, Wait: 12 * time.Millisecond, Max: 9 * time.Millisecond}}) {
		t.Errorf("enforcement detail %+v", d)
	}
	if q, ok := report.SectionOf[quota.Usages](r); !ok || !reflect.DeepEqual(q, quota.Usages{{Tenant: "acme", Tier: tenant.T2, Admitted: 12.5, Refused: 1}, {Tenant: "globex", Admitted: 3}}) {
		t.Errorf("quota %+v", q)
	}
	if f, ok := report.SectionOf[freshness.Window](r); !ok || f.SamplesDropped != 4 || len(f.Samples) != 1 || !f.Samples[0].At.Equal(t0.Add(time.Second/2)) ||
		!reflect.DeepEqual(f.Rules, []freshness.RuleCount{{Rule: "feed-60s", Route: "GET /feed", Matched: 6, Served: 4, Right: 1, Wrong: 1}}) {
		t.Errorf("freshness %+v", f)
	}
	if b, ok := report.SectionOf[budget.Window](r); !ok || len(b.Counters) != 2 || b.Counters[1] != (budget.Counter{ID: "runaway-30s", Runaway: true, Cancelled: 1, Reported: 2, WatchRefused: 3}) ||
		len(b.Actions) != 1 || b.Actions[0].Shape != 0xdeadbeef {
		t.Errorf("budgets %+v", b)
	}
	if r.Keys == nil || r.KeyTenants["sku:2"] != "globex" || r.Enforcement.Shed[3] != 7 || len(r.Rows) != 3 {
		t.Errorf("report %+v", r)
	}
}

// TestGoldenZstdRoundTrip: the zstd body decodes to the report of the
// plain one; encoded again (uncompressed, so that the key sketch's seed
// can be set aside) it gives the plain body's bytes.
func TestGoldenZstdRoundTrip(t *testing.T) {
	r, err := full.Decode(golden(t, "report-v2-sections-zstd.hex"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.MarshalUncompressed()
	if err != nil {
		t.Fatal(err)
	}
	want := golden(t, "report-v2-sections.hex")
	if got = withSeedOf(t, got, want); !bytes.Equal(got, want) {
		t.Fatalf("re-encoded:\n%s\nwant:\n%s", hex.Dump(got), hex.Dump(want))
	}
	// A body without a key sketch is the same bytes, compressed too.
	r.Keys = nil
	plain, _ := r.MarshalBinary()
	back, err := full.Decode(plain)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.MarshalBinary()
	if !bytes.Equal(plain, again) {
		t.Error("zstd body not stable through a decode")
	}
}

// withSeedOf returns got with the seed id of its key sketch (8 bytes, the
// hash seed of this process: see package spacesaving) replaced by the
// one at the same place in want, which another process wrote.
func withSeedOf(t *testing.T, got, want []byte) []byte {
	t.Helper()
	s := spacesaving.New(1)
	enc, _ := s.AppendBinary(nil)
	id := enc[3:11] // after the version, the capacity and log2 (one byte each here)
	i := bytes.Index(got, id)
	if i < 0 || len(want) != len(got) {
		return got
	}
	out := append([]byte(nil), got...)
	copy(out[i:i+8], want[i:i+8])
	return out
}

// TestGoldenV1: a version 1 body decodes to the report of the version 2
// one, and encodes (as version 2) to its bytes.
func TestGoldenV1(t *testing.T) {
	r, err := full.Decode(golden(t, "report-v1.hex"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 1 {
		t.Fatalf("version %d", r.Version)
	}
	r.Version = 0
	got, err := r.MarshalUncompressed()
	if err != nil {
		t.Fatal(err)
	}
	if want := golden(t, "report-v2.hex"); !bytes.Equal(got, want) {
		t.Fatalf("re-encoded:\n%s\nwant:\n%s", hex.Dump(got), hex.Dump(want))
	}
}

// TestGoldenUnknownSections: a decoder that knows none of the features'
// sections skips them and reads the rest.
func TestGoldenUnknownSections(t *testing.T) {
	r, err := report.Decode(golden(t, "report-v2-sections.hex"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sections) != 1 || len(r.Rows) != 3 {
		t.Fatalf("sections %+v, %d rows", r.Sections, len(r.Rows))
	}
	if _, ok := report.SectionOf[report.EnforcementDetail](r); !ok {
		t.Error("the report's own section is missing")
	}
}
