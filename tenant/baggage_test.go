package tenant

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/baggage"
)

// members returns n members "k0=v,…,k<n-1>=v,".
func members(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d=v,", i)
	}
	return b.String()
}

// TestFromBaggageHeaderTolerant: the tenant of a header OpenTelemetry's
// parser refuses as a whole is found, within the bounds read.
func TestFromBaggageHeaderTolerant(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		want   Tags
		err    error
	}{
		{"plain", []string{"tenant.id=acme,tenant.tier=T2"}, Tags{Tenant: "acme", Tier: T2}, nil},
		{"65 members", []string{members(64) + "tenant.id=acme"}, Tags{Tenant: "acme"}, nil},
		{"179 members then the tenant", []string{members(179) + "tenant.id=acme"}, Tags{Tenant: "acme"}, nil},
		{"the tenant after 180 members", []string{members(180) + "tenant.id=acme"}, Tags{}, ErrBaggageMissing},
		{"a malformed member", []string{"tenant.id=acme,bad member,x=y"}, Tags{Tenant: "acme"}, nil},
		{"malformed members around", []string{"=,;,a b=c,tenant.id=acme,k=v v,,"}, Tags{Tenant: "acme"}, nil},
		{"over 8192 bytes, the tenant first", []string{"tenant.id=acme," + strings.Repeat("k=v,", 4000)}, Tags{Tenant: "acme"}, nil},
		{"the tenant past 8192 bytes", []string{"k=" + strings.Repeat("v", MaxBaggageBytes) + ",tenant.id=acme"}, Tags{}, ErrBaggageMissing},
		{"several header values", []string{"k=v", " tenant.id = acme ; p=1 ", "tenant.tier=t1"}, Tags{Tenant: "acme", Tier: T1}, nil},
		{"the last tenant.id wins", []string{"tenant.id=one,tenant.id=two"}, Tags{Tenant: "two"}, nil},
		{"percent-encoded", []string{"tenant.id=a%20b%2Cc"}, Tags{Tenant: "a b,c"}, nil},
		{"no tenant", []string{"k=v,bad member"}, Tags{}, ErrBaggageMissing},
		{"no header", nil, Tags{}, ErrBaggageMissing},
		{"a malformed tenant member", []string{"tenant.id=a b"}, Tags{}, ErrBaggageMalformed},
		{"a malformed tier member", []string{"tenant.id=acme,tenant.tier=T 1"}, Tags{}, ErrTier},
		{"a bad tier", []string{"tenant.id=acme,tenant.tier=T7"}, Tags{}, ErrTier},
		{"a tenant too long", []string{"tenant.id=" + strings.Repeat("x", MaxTenantLen+1)}, Tags{}, ErrTooLong},
		{"a reserved tenant", []string{"tenant.id=%28untagged%29"}, Tags{}, ErrReserved},
	} {
		got, err := FromBaggageHeader(c.values)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s: %+v, %v; want %+v, %v", c.name, got, err, c.want, c.err)
		}
	}
}

// A member that runs past the bytes read is not read, rather than read
// cut: "tenant.id=acmecorp" cut after "acme" must not give "acme".
func TestFromBaggageHeaderCutMember(t *testing.T) {
	for _, split := range []bool{false, true} {
		head := "k=" + strings.Repeat("v", MaxBaggageBytes-len("k=,tenant.id=acme"))
		values := []string{head + ",tenant.id=acmecorp"}
		if split { // the cut falls in the second header value
			values = []string{head[:100], head[101:] + ",tenant.id=acmecorp"}
		}
		if got, err := FromBaggageHeader(values); !errors.Is(err, ErrBaggageMissing) {
			t.Errorf("split %v: %+v, %v; want no tenant", split, got, err)
		}
		// Shorter by what the cut took, the member is whole: it is read.
		values[len(values)-1] = strings.TrimSuffix(values[len(values)-1], "corp")
		if got, err := FromBaggageHeader(values); err != nil || got.Tenant != "acme" {
			t.Errorf("split %v, whole member: %+v, %v", split, got, err)
		}
	}
}

// FuzzFromBaggageHeader: where OpenTelemetry's parser accepts the whole
// header, FromBaggageHeader finds what FromBaggage finds in it.
func FuzzFromBaggageHeader(f *testing.F) {
	f.Add("tenant.id=acme,tenant.tier=T2", "")
	f.Add("k=v;p", "tenant.id=a%20b")
	f.Add("tenant.id=x,tenant.id=y", "tenant.tier=1")
	f.Add(" tenant.id = acme ;p=1", "bad member")
	f.Fuzz(func(t *testing.T, a, b string) {
		values := []string{a}
		if b != "" {
			values = append(values, b)
		}
		got, err := FromBaggageHeader(values)
		if err == nil && got.Validate() != nil {
			t.Fatalf("%q: invalid tags %+v", values, got)
		}
		bg, perr := baggage.Parse(strings.Join(values, ","))
		if perr != nil {
			return
		}
		want, werr := FromBaggage(bg)
		if got != want || (err == nil) != (werr == nil) {
			t.Fatalf("%q: %+v, %v; FromBaggage of the parsed header: %+v, %v", values, got, err, want, werr)
		}
	})
}

func BenchmarkFromBaggageHeader(b *testing.B) {
	h := []string{"tenant.id=acme,tenant.tier=T2"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromBaggageHeader(h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromBaggageHeaderHostile: a megabyte of members costs what
// MaxBaggageBytes of them cost.
func BenchmarkFromBaggageHeaderHostile(b *testing.B) {
	h := []string{strings.Repeat("k=v,", 1<<18) + "tenant.id=acme"}
	b.ReportAllocs()
	for b.Loop() {
		FromBaggageHeader(h)
	}
}
