package meter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/tenant"
)

func TestQuotaSectionRoundTrip(t *testing.T) {
	r := docReport()
	r.Quota = []quota.Usage{{Tenant: "bigco", Tier: tenant.T2, Admitted: 1234.5, Refused: 99}, {Tenant: "shop-a", Admitted: 1}}
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeReport(b)
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, r, got)
	if !reflect.DeepEqual(got.Quota, r.Quota) {
		t.Fatalf("quota %+v, want %+v", got.Quota, r.Quota)
	}
	// A report without usage has no section, and decodes none.
	plain, _ := docReport().MarshalBinary()
	if got, _ := DecodeReport(plain); got.Quota != nil {
		t.Fatalf("quota %+v from a report without the section", got.Quota)
	}
}

func TestQuotaSectionInvalid(t *testing.T) {
	for _, u := range []quota.Usage{
		{Tenant: "", Admitted: 1},
		{Tenant: "a", Admitted: math.NaN()},
		{Tenant: "a", Refused: -1},
		{Tenant: "a", Tier: tenant.Tier(9)},
	} {
		r := docReport()
		r.Quota = []quota.Usage{u}
		if _, err := r.MarshalBinary(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", u, err)
		}
	}
	r := docReport()
	r.Quota = make([]quota.Usage, MaxQuotaTenants+1)
	if _, err := r.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too many: %v", err)
	}
	for _, tc := range []struct {
		name string
		tail []byte
		want error
	}{
		{"count above the limit", []byte{1, 2, 4, 0x91, 0x4e, 0, 0}, ErrTooLarge}, // 10,001 tenants
		{"count above the bytes left", []byte{1, 2, 3, 5, 0, 0}, ErrMalformed},    // 5 tenants in 2 bytes
		{"empty tenant", append([]byte{1, 2, 20, 1, 0, 0}, make([]byte, 16)...), ErrMalformed},
		{"trailing byte", append([]byte{1, 2, 22, 1, 1, 'a', 0}, append(make([]byte, 16), 7)...), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Report
			if err := r.UnmarshalBinary(withSections(t, tc.tail)); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if r.Quota != nil {
				t.Fatal("a failed decode left quota usage")
			}
		})
	}
}

func TestReplyQuotas(t *testing.T) {
	v := []quota.Verdict{{Tenant: "bigco", For: 3 * time.Second, Rate: 0.5, Allowance: 12.5, Shadow: true}}
	b, err := EncodeReply(Reply{Accepted: true, Quotas: v})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeReply(b)
	if err != nil || !reflect.DeepEqual(got.Quotas, v) {
		t.Fatalf("decoded %+v, %v; want %+v", got.Quotas, err, v)
	}
	// Spliced into a cached reply: the same answer.
	cached, _ := EncodeReply(Reply{Accepted: true})
	spliced, err := AppendQuotas(cached, v)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeReply(spliced); err != nil || !reflect.DeepEqual(got.Quotas, v) || !got.Accepted {
		t.Fatalf("spliced %s: %+v, %v", spliced, got, err)
	}
	if _, err := AppendQuotas(spliced, v); !errors.Is(err, ErrInvalid) {
		t.Fatalf("quotas appended twice: %v", err)
	}
	if same, _ := AppendQuotas(cached, nil); string(same) != string(cached) {
		t.Fatal("no verdicts changed the reply")
	}
	for _, bad := range []string{
		`{"accepted":true,"quotas":[{"tenant":"","reject_for_seconds":1}]}`,
		`{"accepted":true,"quotas":[{"tenant":"a","reject_for_seconds":0}]}`,
		`{"accepted":true,"quotas":[{"tenant":"a","reject_for_seconds":1,"rejection_rate":2}]}`,
		`{"accepted":true,"quotas":[{"tenant":"a","reject_for_seconds":1,"allowance_ru_per_second":-1}]}`,
		`{"accepted":true,"quotas":[{"tenant":"a","reject_for_seconds":1e9}]}`,
	} {
		if _, err := DecodeReply([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", bad, err)
		}
	}
	many := make([]wireVerdict, MaxQuotaTenants+1)
	for i := range many {
		many[i] = wireVerdict{Tenant: "t", For: 1}
	}
	mb, _ := json.Marshal(wireReply{Accepted: true, Quotas: many})
	if _, err := DecodeReply(mb); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too many verdicts: %v", err)
	}
}

// TestReplyQuotasSmall: a reply lists only limited tenants, so with one
// of 10,000 tenants limited it stays a few hundred bytes.
func TestReplyQuotasSmall(t *testing.T) {
	lim := func(name string, _ tenant.Tier) (quota.Limit, bool) {
		return quota.Limit{RUPerSecond: 1000}, true
	}
	f, _ := quota.NewFleet(lim)
	usage := make([]quota.Usage, MaxQuotaTenants)
	for i := range usage {
		usage[i] = quota.Usage{Tenant: fmt.Sprintf("tenant-%05d", i), Admitted: 10}
	}
	usage[42].Admitted = 5000
	f.Observe(time.Unix(0, 0), "p1", time.Second, usage)
	cached, _ := EncodeReply(Reply{Accepted: true})
	b, err := AppendQuotas(cached, f.Verdicts(time.Unix(0, 0), "p1", nil))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := DecodeReply(b)
	if len(got.Quotas) != 1 || got.Quotas[0].Tenant != "tenant-00042" || len(b) > 256 {
		t.Fatalf("reply of %d bytes with %d verdicts: %s", len(b), len(got.Quotas), b)
	}
	t.Logf("reply with 10,000 tenants reported, 1 limited: %d bytes", len(b))
}

// FuzzQuotaSection: whatever the bytes, decoding a report with a quota
// section never panics, and what decodes encodes back to the same usage.
func FuzzQuotaSection(f *testing.F) {
	r := docReport()
	r.Quota = []quota.Usage{{Tenant: "bigco", Tier: tenant.T2, Admitted: 12, Refused: 3}}
	b, _ := r.marshalUncompressed()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Report
		if err := got.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := got.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded report does not encode: %v", err)
		}
		back, err := DecodeReport(again)
		if err != nil || !reflect.DeepEqual(back.Quota, got.Quota) {
			t.Fatalf("quota %+v → %+v, %v", got.Quota, back.Quota, err)
		}
	})
}
