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

// TestPrintTableTrouble: the table says what the JSON says of a peer that
// did not answer and of a store that takes no writes, and nothing when
// all is well.
func TestPrintTableTrouble(t *testing.T) {
	s := incident()
	var b strings.Builder
	if err := Print(&b, s, FormatTable); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "did not answer") || strings.Contains(out, "store unhealthy") {
		t.Fatalf("a healthy collector's table:\n%s", out)
	}
	none := s
	none.Collector.Store, none.Collector.StoreHealthy = "none", false // --store none
	b.Reset()
	if err := Print(&b, none, FormatTable); err != nil || strings.Contains(b.String(), "store unhealthy") {
		t.Fatalf("--store none: %v\n%s", err, b.String())
	}
	s.Peers = []api.PeerStatus{{Collector: "c1", OK: true}, {Collector: "c3:7070", Error: "connection refused"}}
	s.Collector.Store, s.Collector.StoreHealthy = "clickhouse://ch1:9000/qtop", false
	s.Collector.StoreError, s.Collector.SpoolBytes, s.Collector.SpoolOldestSeconds = "the store failed a write", 4096, 71
	b.Reset()
	if err := Print(&b, s, FormatTable); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.String(), "peer c3:7070 did not answer", "connection refused", "store unhealthy: the store failed a write (4096 bytes wait in the spool, the oldest for 71 s)")
	if strings.Contains(b.String(), "peer c1 ") {
		t.Fatalf("a peer that answered is named:\n%s", b.String())
	}
}
