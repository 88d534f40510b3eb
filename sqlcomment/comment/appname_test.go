package comment_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/tenant"
)

func TestApplicationName(t *testing.T) {
	long := strings.Repeat("x", 41)
	for _, c := range []struct {
		service string
		tags    tenant.Tags
		want    string
	}{
		{"billing", tenant.Tags{Tenant: "acme", Tier: tenant.T2}, "billing|t=acme|T2"},
		{"billing", tenant.Tags{Tenant: "acme"}, "billing|t=acme"},
		{"billing", tenant.Tags{}, "billing"},
		{"", tenant.Tags{Tenant: "acme", Tier: tenant.T0}, "|t=acme|T0"},
		{"bill|ing's\\", tenant.Tags{Tenant: "a|b%c'd\\e~f"}, "bill_ing_s_|t=a%7Cb%25c%27d%5Ce%7Ef"},
		{"billing", tenant.Tags{Tenant: "café"}, "billing|t=caf%C3%A9"},
		{"billing", tenant.Tags{Tenant: strings.Repeat("x", 40)}, "billing|t=" + strings.Repeat("x", 40)},
		{"billing", tenant.Tags{Tenant: long}, "billing|t=" + comment.TenantID(long)},
		{"billing", tenant.Tags{Tenant: "日本の会社株式会社東京本社"}, "billing|t=" + comment.TenantID("日本の会社株式会社東京本社")},
		{strings.Repeat("s", 70), tenant.Tags{}, strings.Repeat("s", 63)},
		{strings.Repeat("s", 70), tenant.Tags{Tenant: strings.Repeat("x", 40), Tier: tenant.T3},
			strings.Repeat("s", 17) + "|t=" + strings.Repeat("x", 40) + "|T3"},
		{"sérvice", tenant.Tags{Tenant: "a"}, "s__rvice|t=a"},
	} {
		got := comment.ApplicationName(c.service, c.tags)
		if got != c.want {
			t.Errorf("ApplicationName(%q, %+v) = %q, want %q", c.service, c.tags, got, c.want)
		}
		if len(got) > comment.MaxApplicationNameLen {
			t.Errorf("%q: %d bytes", got, len(got))
		}
		if c.tags.Tenant == "" {
			if _, ok := comment.ParseApplicationName(got); ok {
				t.Errorf("ParseApplicationName(%q) found a tenant", got)
			}
			continue
		}
		a, ok := comment.ParseApplicationName(got)
		wantTenant := c.tags.Tenant
		if a.ID {
			wantTenant = comment.TenantID(c.tags.Tenant)
		}
		if !ok || a.Tenant != wantTenant || a.Tier != c.tags.Tier || !strings.HasPrefix(got, a.Service+"|t=") {
			t.Errorf("ParseApplicationName(%q) = %+v, %v", got, a, ok)
		}
	}
}

func TestTenantID(t *testing.T) {
	id := comment.TenantID("acme")
	if len(id) != 13 || id[0] != '~' || id != comment.TenantID("acme") || id == comment.TenantID("acme2") {
		t.Fatalf("TenantID: %q", id)
	}
	if err := tenant.ValidateTenant(id); err != nil {
		t.Fatalf("an id is not a valid tenant: %v", err)
	}
}

// TestWrittenID: WrittenID says exactly when ApplicationName writes a
// tenant as its id, and which id, on both sides of the 40-byte field.
func TestWrittenID(t *testing.T) {
	for _, name := range []string{"acme", strings.Repeat("a", 40), strings.Repeat("a", 41), strings.Repeat("ü", 6), strings.Repeat("ü", 7), "a~b", strings.Repeat("~", 14)} {
		a, ok := comment.ParseApplicationName(comment.ApplicationName("svc", tenant.Tags{Tenant: name}))
		if !ok {
			t.Fatalf("%q: not read back", name)
		}
		id, isID := comment.WrittenID(name)
		if isID != a.ID || (isID && id != a.Tenant) || (!isID && id != "") {
			t.Errorf("%q: WrittenID = %q, %v; ApplicationName wrote %q (id %v)", name, id, isID, a.Tenant, a.ID)
		}
	}
}

func TestParseApplicationNameRejects(t *testing.T) {
	for _, s := range []string{"", "billing", "billing|t=", "billing|t=%4", "billing|t=%zz", "billing|t=%41%4",
		"billing|t=~abc", "billing|t=~ABCDEFGHIJKLM", "billing|t=a|b", "billing|t=(untagged)", "billing|t=%0A",
		"billing|t=" + strings.Repeat("x", 41), "billing|T2"} {
		if a, ok := comment.ParseApplicationName(s); ok {
			t.Errorf("ParseApplicationName(%q) = %+v, want false", s, a)
		}
	}
	a, ok := comment.ParseApplicationName("a|t=b|t=c|T1")
	if !ok || a.Service != "a|t=b" || a.Tenant != "c" || a.Tier != tenant.T1 {
		t.Errorf("the last tenant field wins: %+v %v", a, ok)
	}
}

// FuzzParseApplicationName: no input panics; what parses re-encodes to a
// name that parses the same; every encoding fits PostgreSQL's 63 printable
// ASCII bytes and parses back to its tenant (or its id) and tier.
func FuzzParseApplicationName(f *testing.F) {
	for _, s := range []string{"billing|t=acme|T2", "x|t=caf%C3%A9", "|t=~abcdefghijkl", "a|t=b|t=c|T1", "billing", "%", "|t=%"} {
		f.Add(s, "svc", "acme", uint8(2))
	}
	f.Fuzz(func(t *testing.T, s, service, name string, tier uint8) {
		if a, ok := comment.ParseApplicationName(s); ok {
			again := comment.ApplicationName(a.Service, tenant.Tags{Tenant: a.Tenant, Tier: a.Tier})
			b, ok := comment.ParseApplicationName(again)
			if !ok || b.Tier != a.Tier || (!a.ID && b.Tenant != a.Tenant && b.Tenant != comment.TenantID(a.Tenant)) {
				t.Fatalf("%q → %+v → %q → %+v", s, a, again, b)
			}
		}
		tags := tenant.Tags{Tenant: name, Tier: tenant.Tier(tier % 6)}
		got := comment.ApplicationName(service, tags)
		if len(got) > comment.MaxApplicationNameLen {
			t.Fatalf("%q is %d bytes", got, len(got))
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] >= 0x7f || got[i] == '\'' || got[i] == '\\' {
				t.Fatalf("%q has byte %#x", got, got[i])
			}
		}
		if tenant.ValidateTenant(name) != nil {
			return
		}
		a, ok := comment.ParseApplicationName(got)
		want := name
		if a.ID {
			want = comment.TenantID(name)
		}
		wantTier := tags.Tier
		if !wantTier.Valid() {
			wantTier = tenant.TierUnset
		}
		if !ok || a.Tenant != want || a.Tier != wantTier {
			t.Fatalf("ApplicationName(%q, %q) = %q → %+v, %v", service, name, got, a, ok)
		}
	})
}

// BenchmarkApplicationName: the session tag of one transaction, for a
// short ASCII tenant and for a long one written as its id.
func BenchmarkApplicationName(b *testing.B) {
	for _, name := range []string{"tenant-00042", strings.Repeat("ü", 30)} {
		tags := tenant.Tags{Tenant: name, Tier: tenant.T2}
		b.Run(fmt.Sprint(len(name)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				comment.ApplicationName("billing-api", tags)
			}
		})
	}
}
