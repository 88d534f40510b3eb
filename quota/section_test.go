package quota_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/reporttest"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

var dec = report.NewDecoder(quota.Usages(nil))

func TestUsagesSectionRoundTrip(t *testing.T) {
	u := quota.Usages{{Tenant: "bigco", Tier: tenant.T2, Admitted: 1234.5, Refused: 99}, {Tenant: "shop-a", Admitted: 1}}
	r, err := dec.Decode(reporttest.Body(u))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := report.SectionOf[quota.Usages](r); !ok || !reflect.DeepEqual(got, u) {
		t.Fatalf("quota %+v, want %+v", got, u)
	}
	// A report without usage has no section, and decodes none.
	r, _ = dec.Decode(reporttest.Body())
	if got, ok := report.SectionOf[quota.Usages](r); ok {
		t.Fatalf("quota %+v from a report without the section", got)
	}
}

func TestUsagesSectionInvalid(t *testing.T) {
	for _, u := range []quota.Usage{
		{Tenant: "", Admitted: 1},
		{Tenant: "a", Admitted: math.NaN()},
		{Tenant: "a", Refused: -1},
		{Tenant: "a", Tier: tenant.Tier(9)},
	} {
		if _, err := (quota.Usages{u}).AppendSection(nil); !errors.Is(err, report.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", u, err)
		}
	}
	if _, err := make(quota.Usages, quota.MaxReportTenants+1).AppendSection(nil); !errors.Is(err, report.ErrTooLarge) {
		t.Errorf("too many: %v", err)
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    error
	}{
		{"count above the limit", []byte{0x91, 0x4e, 0, 0}, report.ErrTooLarge}, // 10,001 tenants
		{"count above the bytes left", []byte{5, 0, 0}, report.ErrMalformed},    // 5 tenants in 2 bytes
		{"empty tenant", append([]byte{1, 0, 0}, make([]byte, 16)...), report.ErrMalformed},
		{"trailing byte", append([]byte{1, 1, 'a', 0}, append(make([]byte, 16), 7)...), report.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := dec.Decode(reporttest.Body(reporttest.Raw{Tag: 2, Payload: tc.payload})); !errors.Is(err, tc.want) || r != nil {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestVerdictsInReply(t *testing.T) {
	v := []quota.Verdict{{Tenant: "bigco", For: 3 * time.Second, Rate: 0.5, Allowance: 12.5, Shadow: true}}
	raw, err := quota.MarshalVerdicts(v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := report.EncodeReply(report.Reply{Accepted: true, Quotas: raw})
	if err != nil {
		t.Fatal(err)
	}
	got, err := report.DecodeReply(b)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := quota.UnmarshalVerdicts(got.Quotas); err != nil || !reflect.DeepEqual(back, v) {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, v)
	}
	for _, bad := range []string{
		`[{"tenant":"","reject_for_seconds":1}]`,
		`[{"tenant":"a","reject_for_seconds":0}]`,
		`[{"tenant":"a","reject_for_seconds":1,"rejection_rate":2}]`,
		`[{"tenant":"a","reject_for_seconds":1,"allowance_ru_per_second":-1}]`,
		`[{"tenant":"a","reject_for_seconds":1e9}]`,
		`{"tenant":"a"}`,
	} {
		if _, err := quota.UnmarshalVerdicts(json.RawMessage(bad)); !errors.Is(err, report.ErrMalformed) {
			t.Errorf("%s: %v, want report.ErrMalformed", bad, err)
		}
	}
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"tenant":"t","reject_for_seconds":1},`, quota.MaxReportTenants+1), ",") + "]"
	if _, err := quota.UnmarshalVerdicts(json.RawMessage(many)); !errors.Is(err, report.ErrTooLarge) {
		t.Errorf("too many verdicts: %v", err)
	}
	if _, err := quota.MarshalVerdicts([]quota.Verdict{{Tenant: "a"}}); !errors.Is(err, report.ErrInvalid) {
		t.Errorf("invalid verdict: %v", err)
	}
}

// TestReplyQuotasSmall: a reply lists only limited tenants, so with one
// of 10,000 tenants limited it stays a few hundred bytes.
func TestReplyQuotasSmall(t *testing.T) {
	lim := func(name string, _ tenant.Tier) (quota.Limit, bool) {
		return quota.Limit{RUPerSecond: 1000}, true
	}
	f, _ := quota.NewFleet(lim)
	usage := make([]quota.Usage, quota.MaxReportTenants)
	for i := range usage {
		usage[i] = quota.Usage{Tenant: fmt.Sprintf("tenant-%05d", i), Admitted: 10}
	}
	usage[42].Admitted = 5000
	f.Observe(time.Unix(0, 0), "p1", time.Second, usage)
	raw, err := quota.MarshalVerdicts(f.Verdicts(time.Unix(0, 0), "p1", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := report.EncodeReply(report.Reply{Accepted: true, Quotas: raw})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := report.DecodeReply(b)
	v, _ := quota.UnmarshalVerdicts(got.Quotas)
	if len(v) != 1 || v[0].Tenant != "tenant-00042" || len(b) > 256 {
		t.Fatalf("reply of %d bytes with %d verdicts: %s", len(b), len(v), b)
	}
}

// FuzzUsagesSection: whatever the payload, decoding never panics, and
// what decodes encodes back to a payload of the same usage.
func FuzzUsagesSection(f *testing.F) {
	p, _ := quota.Usages{{Tenant: "bigco", Tier: tenant.T2, Admitted: 12, Refused: 3}}.AppendSection(nil)
	f.Add(p)
	f.Fuzz(func(t *testing.T, p []byte) {
		d := report.NewReader(p)
		s := quota.Usages(nil).DecodeSection(d)
		if s == nil || d.Len() != 0 {
			return
		}
		again, err := s.AppendSection(nil)
		if err != nil {
			t.Fatalf("usage %+v does not encode: %v", s, err)
		}
		if back := quota.Usages(nil).DecodeSection(report.NewReader(again)); !reflect.DeepEqual(back, s) {
			t.Fatalf("usage %+v → %+v", s, back)
		}
	})
}
