package pgactivity

import (
	"maps"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

func TestSetTags(t *testing.T) {
	long := strings.Repeat("x", 5000)
	tests := []struct {
		name      string
		query     string
		truncated bool
		app       string
		want      Backend // only the tag fields are compared
		invalid   bool    // want.InvalidTenant()
	}{
		{name: "untagged", query: "SELECT 1"},
		{name: "empty", query: ""},
		{
			name:  "tagged",
			query: "SELECT pg_sleep(1) /*application='billing',route='GET%20%2Fr',tenant='acme',tier='T2'*/",
			want: Backend{Tenant: "acme", Route: "GET /r", Tier: tenant.T2, Application: "billing",
				Tags: map[string]string{"application": "billing", "route": "GET /r", "tenant": "acme", "tier": "T2"}},
		},
		{
			name:  "application_name wins over the tag",
			query: "SELECT 1 /*application='billing',tenant='acme'*/", app: "psql",
			want: Backend{Tenant: "acme", Application: "psql", Tags: map[string]string{"application": "billing", "tenant": "acme"}},
		},
		{
			name:  "tags without a tenant",
			query: "SELECT 1 /*route='r'*/",
			want:  Backend{Route: "r", Tags: map[string]string{"route": "r"}},
		},
		{
			name:  "a route named like the overflow row is its stand-in",
			query: "SELECT 1 /*route='other',tenant='acme'*/",
			want:  Backend{Tenant: "acme", Route: "other#d9298a10d1b07358", Tags: map[string]string{"route": "other", "tenant": "acme"}},
		},
		{
			name:  "an over-long route is its stand-in, the tenant kept",
			query: "SELECT 1 /*route='" + strings.Repeat("r", tenant.MaxRouteLen+1) + "',tenant='acme'*/",
			want: Backend{Tenant: "acme", Route: strings.Repeat("r", 48) + "…#62f1ad91072eb59a",
				Tags: map[string]string{"route": strings.Repeat("r", tenant.MaxRouteLen+1), "tenant": "acme"}},
		},
		{name: "malformed comment", query: "SELECT 1 /*tenant='acme*/"},
		{name: "unterminated comment", query: "SELECT 1 /*tenant='acme'"},
		{name: "a plain comment", query: "SELECT 1 /* fetch users */"},
		{
			name:  "bad tier is unset, the rest kept",
			query: "SELECT 1 /*tenant='acme',tier='T9'*/",
			want:  Backend{Tenant: "acme", Tags: map[string]string{"tenant": "acme", "tier": "T9"}},
		},
		{
			name:  "non-printable tenant is its stand-in",
			query: "SELECT 1 /*tenant='a%0Ab'*/",
			want:  Backend{Tenant: `a\x0ab#7e18f737311b2dc3`, Tags: map[string]string{"tenant": "a\nb"}}, invalid: true,
		},
		{
			name:  "over-long tenant is its stand-in",
			query: "SELECT 1 /*tenant='" + strings.Repeat("a", tenant.MaxTenantLen+1) + "'*/",
			want: Backend{Tenant: strings.Repeat("a", 48) + "…#c12cb024a2e5551c",
				Tags: map[string]string{"tenant": strings.Repeat("a", tenant.MaxTenantLen+1)}}, invalid: true,
		},
		{
			name:  "truncated: the trailing comment was cut",
			query: "SELECT '" + long[:100] + "' /*route='r',ten", truncated: true,
		},
		{
			name:  "truncated: only an inner comment is left",
			query: "SELECT /*tenant='inner'*/ '" + long[:100], truncated: true,
		},
		{
			name:  "truncated: a comment opening the statement is read",
			query: "  /*tenant='lead'*/ SELECT '" + long[:100], truncated: true,
			want: Backend{Tenant: "lead", Tags: map[string]string{"tenant": "lead"}},
		},
		{
			name:  "truncated exactly after the comment",
			query: "SELECT '" + long[:100] + "' /*tenant='acme'*/", truncated: true,
			want: Backend{Tenant: "acme", Tags: map[string]string{"tenant": "acme"}},
		},
		{
			name:  "truncated: an opening comment left open",
			query: "/*tenant='lead'", truncated: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Backend{Query: tt.query, Truncated: tt.truncated, Application: tt.app}
			b.setTags()
			if b.Tenant != tt.want.Tenant || b.Route != tt.want.Route || b.Tier != tt.want.Tier || b.InvalidTenant() != tt.invalid {
				t.Errorf("tenant, route, tier, invalid = %q, %q, %v, %v; want %q, %q, %v, %v", b.Tenant, b.Route, b.Tier, b.InvalidTenant(),
					tt.want.Tenant, tt.want.Route, tt.want.Tier, tt.invalid)
			}
			wantApp := tt.want.Application
			if tt.app != "" {
				wantApp = tt.app
			}
			if b.Application != wantApp {
				t.Errorf("application = %q, want %q", b.Application, wantApp)
			}
			if !maps.Equal(b.Tags, tt.want.Tags) {
				t.Errorf("tags = %v, want %v", b.Tags, tt.want.Tags)
			}
		})
	}
}

// TestSetTagsFlags: what could not be read is flagged, and a malformed
// comment keeps its well-formed pairs.
func TestSetTagsFlags(t *testing.T) {
	for _, tt := range []struct {
		query          string
		truncated      bool
		malformed, cut bool
		tenant         string
	}{
		{query: "SELECT 1 /*tenant='acme'*/", tenant: "acme"},
		{query: "SELECT 1 /*tenant='acme',route='%ZZ'*/", malformed: true, tenant: "acme"},
		{query: "SELECT 1 /*tenant='acme*/", malformed: true},
		{query: "SELECT 1 /* nightly batch */"},
		{query: "SELECT 1 /*tenant='acme'*/ /* nightly batch */", tenant: "acme"},
		{query: "SELECT 'xxxx' /*tenant='ac", truncated: true, cut: true},
		{query: "SELECT 'xxxx'", truncated: true, cut: true},
		{query: "/*tenant='lead'*/ SELECT 'xxxx", truncated: true, tenant: "lead"},
	} {
		b := Backend{Query: tt.query, Truncated: tt.truncated}
		b.setTags()
		if b.Malformed != tt.malformed || b.TagsCut != tt.cut || b.Tenant != tt.tenant {
			t.Errorf("%q: malformed %v cut %v tenant %q; want %v %v %q", tt.query, b.Malformed, b.TagsCut, b.Tenant, tt.malformed, tt.cut, tt.tenant)
		}
	}
}

// TestMetricsCountEachStatementOnce: a statement seen in many samples
// counts once; a new statement of the same pid counts again.
func TestMetricsCountEachStatementOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bad := Backend{PID: 7, QueryStart: t1, Malformed: true}
	cut := Backend{PID: 8, QueryStart: t1, TagsCut: true}
	ok := Backend{PID: 9, QueryStart: t1}
	stand, _ := tenant.Substitute("a\nb")
	invTags := map[string]string{"tenant": "a\nb"}
	inv := Backend{PID: 10, QueryStart: t1, Tenant: stand, Tags: invTags}
	badInv := Backend{PID: 11, QueryStart: t1, Malformed: true, Tenant: stand, Tags: invTags}
	for range 3 {
		m.observe(&Snapshot{Backends: []Backend{bad, cut, ok, inv, badInv}})
	}
	bad.QueryStart = t1.Add(time.Second)
	m.observe(&Snapshot{Backends: []Backend{bad, cut, inv}})
	if mal, tr := m.Counts(); mal != 3 || tr != 1 || m.InvalidTenants() != 2 {
		t.Fatalf("counts %d, %d, %d; want 3, 1, 2", mal, tr, m.InvalidTenants())
	}
	want := `
# HELP qtop_pgactivity_invalid_tenants_total Sampled statements whose tenant is not a valid name (too long, unprintable, in parentheses), each counted once; their load counts under the name's stand-in (tenant.Substitute), apart from every other tenant.
# TYPE qtop_pgactivity_invalid_tenants_total counter
qtop_pgactivity_invalid_tenants_total 2
# HELP qtop_pgactivity_malformed_comments_total Sampled statements whose sqlcommenter comment could not be read whole (some or all of their tags lost), each counted once.
# TYPE qtop_pgactivity_malformed_comments_total counter
qtop_pgactivity_malformed_comments_total 3
# HELP qtop_pgactivity_truncated_statements_total Sampled statements cut at track_activity_query_size before their comment, so their tags are lost; raise track_activity_query_size.
# TYPE qtop_pgactivity_truncated_statements_total counter
qtop_pgactivity_truncated_statements_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Fatal(probs, err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice must fail")
	}
	var nilM *Metrics
	nilM.observe(&Snapshot{Backends: []Backend{bad}})
	if a, b := nilM.Counts(); a != 0 || b != 0 || nilM.InvalidTenants() != 0 {
		t.Fatal("nil metrics count")
	}
}

func TestBackendWaitAndState(t *testing.T) {
	for _, tt := range []struct {
		b      Backend
		active bool
		wait   string
		hidden bool
	}{
		{Backend{State: StateActive}, true, WaitCPU, false},
		{Backend{State: StateActive, WaitEventType: "Lock", WaitEvent: "transactionid"}, true, "Lock", false},
		{Backend{State: StateFastpath}, true, WaitCPU, false},
		{Backend{State: StateIdleInTransaction, WaitEventType: "Client"}, false, "Client", false},
		{Backend{State: StateIdle}, false, WaitCPU, false},
		{Backend{Query: HiddenQuery}, false, WaitCPU, true},
		{Backend{State: StateActive, Query: HiddenQuery}, true, WaitCPU, false}, // a query that reads like the marker
	} {
		if got := tt.b.Active(); got != tt.active {
			t.Errorf("%+v: Active = %v", tt.b, got)
		}
		if got := tt.b.Wait(); got != tt.wait {
			t.Errorf("%+v: Wait = %q", tt.b, got)
		}
		if got := tt.b.Hidden(); got != tt.hidden {
			t.Errorf("%+v: Hidden = %v", tt.b, got)
		}
	}
}

// FuzzSetTags feeds any query text, truncated or not, to the tag reader:
// it never panics, a tenant it reports is valid, and an untruncated
// sqlcommenter comment appended to any comment-free query reads back.
func FuzzSetTags(f *testing.F) {
	f.Add("SELECT 1 /*tenant='acme'*/", "acme", false)
	f.Add("/*tenant='a'*/ SELECT", "b", true)
	f.Add("SELECT '/*' /*tenant='x%2", "x", true)
	f.Add("SELECT 1 /*tenant=acme,tier=T1*/;", "", false)
	f.Add("/*", "*/", true)
	f.Fuzz(func(t *testing.T, query, name string, truncated bool) {
		b := Backend{Query: query, Truncated: truncated}
		b.setTags()
		if b.Tenant != "" && tenant.ValidateTenant(b.Tenant) != nil {
			t.Fatalf("invalid tenant %q accepted from %q", b.Tenant, query)
		}
		if b.Tenant == "" && b.Route == "" && b.Tier == tenant.TierUnset && b.Tags == nil && b.Application != "" {
			t.Fatalf("application %q without tags", b.Application)
		}
		if tenant.ValidateTenant(name) != nil || !utf8.ValidString(query) {
			return
		}
		q := sqlcomment.Append(query, map[string]string{"tenant": name})
		if q == query {
			return // Append declined (the query already has a comment, or is empty)
		}
		c := Backend{Query: q}
		c.setTags()
		if c.Tenant != name {
			t.Fatalf("Append(%q) = %q reads back tenant %q, want %q", query, q, c.Tenant, name)
		}
	})
}
