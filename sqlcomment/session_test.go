package sqlcomment_test

import (
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/sqlcomment"
)

func TestTenantNames(t *testing.T) {
	n := sqlcomment.NewTenantNames(2)
	a := n.Add("alpha")
	n.Add("alpha")
	n.Add("beta")
	if got := n.Add("gamma"); got != sqlcomment.TenantID("gamma") {
		t.Fatal(got)
	}
	if _, ok := n.Lookup(sqlcomment.TenantID("gamma")); ok {
		t.Fatal("full of undrained names: gamma must be dropped")
	}
	seen := map[string]string{}
	n.Drain(func(id, name string) { seen[id] = name })
	if len(seen) != 2 || seen[a] != "alpha" {
		t.Fatalf("drained %v", seen)
	}
	n.Drain(func(id, name string) { t.Fatalf("drained twice: %s", name) })
	n.Add("gamma") // evicts a drained one
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
