package sqlcomment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/tenantnames"
	"github.com/qtop-dev/qtop/tenant"
)

func TestTenantNames(t *testing.T) {
	n := sqlcomment.NewTenantNames(2)
	n.Add("alpha")
	n.Add("alpha")
	n.Add("beta")
	if got := n.Add("gamma"); got != sqlcomment.TenantID("gamma") {
		t.Fatal(got)
	}
	if _, ok := n.Lookup(sqlcomment.TenantID("gamma")); ok {
		t.Fatal("full of undrained names: gamma must be dropped")
	}
	sec, _ := n.Section().(tenantnames.Names)
	if len(sec) != 2 || (sec[0].Name != "alpha" && sec[1].Name != "alpha") {
		t.Fatalf("sent %v", sec)
	}
	for i := 2; i < sqlcomment.ResendEvery; i++ {
		if s := n.Section(); s != nil {
			t.Fatalf("section %d sent %v again", i, s)
		}
	}
	if again, _ := n.Section().(tenantnames.Names); len(again) != 2 {
		t.Fatalf("the resend after %d sections: %v", sqlcomment.ResendEvery, again)
	}
	// What a report carries decodes to the same names.
	rep := &report.Report{Source: report.Source{Service: "s", Instance: "i"}, Seq: 1, Start: time.Unix(0, 0), End: time.Unix(1, 0)}
	rep.SetSection(sec)
	body, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := report.NewDecoder(tenantnames.Names(nil)).Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := report.SectionOf[tenantnames.Names](got); len(back) != 2 {
		t.Fatalf("decoded %v", got.Sections)
	}
	n.Add("gamma") // evicts a name already sent
	if name, ok := n.Lookup(sqlcomment.TenantID("gamma")); !ok || name != "gamma" {
		t.Fatal("gamma not kept after a drain")
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]sqlcomment.Mode{"": sqlcomment.ModeComment, "auto": sqlcomment.ModeAuto,
		"Comment": sqlcomment.ModeComment, "session": sqlcomment.ModeSession, " both ": sqlcomment.ModeBoth} {
		if m, err := sqlcomment.ParseMode(s); err != nil || m != want || (s != "" && m.String() != strings.ToLower(strings.TrimSpace(s))) {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := sqlcomment.ParseMode("tag"); err == nil {
		t.Error("ParseMode(tag) succeeded")
	}
	if sqlcomment.ModeAuto.Resolve(true) != sqlcomment.ModeSession || sqlcomment.ModeAuto.Resolve(false) != sqlcomment.ModeComment ||
		sqlcomment.ModeBoth.Resolve(false) != sqlcomment.ModeComment || sqlcomment.ModeBoth.Resolve(true) != sqlcomment.ModeBoth {
		t.Error("Resolve")
	}
}

// TestApplicationNameStandIn: a tenant name ValidateTenant refuses is
// written as its stand-in, the name a comment would give it at the
// collector; the names a report carries stay encodable (one such name
// used to fail the whole section, and the agent's report with it).
func TestApplicationNameStandIn(t *testing.T) {
	names := sqlcomment.NewTenantNames(0)
	c := sqlcomment.NewCommenter(sqlcomment.WithApplication("svc"), sqlcomment.WithMode(sqlcomment.ModeSession), sqlcomment.WithTenantNames(names))
	long := strings.Repeat("a", 200)
	stand, _ := tenant.Substitute(long)
	app := c.ApplicationName(tenant.Tags{Tenant: long})
	if !strings.Contains(app, sqlcomment.TenantID(stand)) {
		t.Fatalf("application_name %q, want the id of %q", app, stand)
	}
	valid := "Q" + strings.Repeat("L", 100)
	c.ApplicationName(tenant.Tags{Tenant: valid})
	names.Add(long) // refused: not recorded
	sec, _ := names.Section().(tenantnames.Names)
	got := map[string]bool{}
	for _, n := range sec {
		got[n.Name] = true
	}
	if len(sec) != 2 || !got[stand] || !got[valid] {
		t.Fatalf("names sent %v", sec)
	}
	if _, err := sec.AppendSection(nil); err != nil {
		t.Fatal(err)
	}
}
