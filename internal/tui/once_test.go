package tui

import (
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/api"
)

// TestPrintTableIncident: --once's table carries the lock pairs, the xmin
// holders and the unread-tags counts; under --postgres it says n/a for
// what PostgreSQL cannot know and "one sample" for a single sample; a
// statement that waits on nothing shows no "WAIT :".
func TestPrintTableIncident(t *testing.T) {
	s := incident()
	s.Collector.MalformedComments, s.Collector.TruncatedStatements = 3, 2
	var b strings.Builder
	if err := Print(&b, s, FormatTable); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	mustContain(t, out, "window 10s", "BLOCKED", "XMIN HOLDER", "48210 xids", "(untagged)", "7001",
		"tags lost: 3 comments unread, 2 statements cut (track_activity_query_size)")
	if strings.Contains(out, " :") || strings.Contains(out, "n/a") {
		t.Errorf("collector table:\n%s", out)
	}

	s.Source, s.Window, s.GroupBy = api.SourcePostgres, 0, api.GroupApplication
	s.Tenants[0].Untagged, s.Tenants[0].Tenant = true, ""
	s.ParallelWorkers = 3
	b.Reset()
	if err := Print(&b, s, FormatTable); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	mustContain(t, out, "one sample", "groups by application", "APPLICATION", "(no application_name)", "n/a", "3 parallel workers")
	if strings.Contains(out, "window 0s") {
		t.Errorf("postgres table:\n%s", out)
	}
}
