package chstore

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden DDL files in testdata/")

var (
	versions = []Version{{18, 16}, {19, 16}, {24, 8}}
	layouts  = []struct {
		name                  string
		cluster               string
		replicated, nodeLocal bool
	}{
		{"single", "", false, false},
		{"cluster", "main", false, false},
		{"cluster_replicated", "main", true, false},
		{"cluster_nodelocal", "main", false, true},
		{"cluster_replicated_nodelocal", "main", true, true},
	}
	retentions = []time.Duration{0, 90 * 24 * time.Hour}
)

// TestDDLGolden renders the schema for every server version × layout ×
// retention and compares it with testdata/ (go test -update rewrites).
func TestDDLGolden(t *testing.T) {
	for _, v := range versions {
		for _, l := range layouts {
			for _, r := range retentions {
				sc := Schema{Database: "qtop", Version: v, Cluster: l.cluster, Replicated: l.replicated, NodeLocal: l.nodeLocal, Retention: r}
				name := fmt.Sprintf("ddl_%d.%d_%s_ttl%dd.sql", v.Major, v.Minor, l.name, int(r.Hours()/24))
				// A server without TTL renders no retention: its retention
				// case must equal the ttl0d golden, which it reads.
				golden := name
				if !sc.features().TTL {
					golden = fmt.Sprintf("ddl_%d.%d_%s_ttl0d.sql", v.Major, v.Minor, l.name)
				}
				t.Run(name, func(t *testing.T) {
					if err := sc.Validate(); err != nil {
						t.Fatal(err)
					}
					got := sc.DDL()
					checkDDL(t, sc, got)
					path := filepath.Join("testdata", golden)
					if *update {
						if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
							t.Fatal(err)
						}
						return
					}
					want, err := os.ReadFile(path)
					if err != nil {
						t.Fatalf("%v (run go test -update to create it)", err)
					}
					if got != string(want) {
						t.Fatalf("rendered DDL differs from %s (go test -update to accept):\n%s", path, got)
					}
				})
			}
		}
	}
}

// checkDDL states the rules the golden files must follow, so a wrong
// golden cannot be accepted by -update unnoticed.
func checkDDL(t *testing.T, sc Schema, ddl string) {
	t.Helper()
	f := FeaturesOf(sc.Version)
	has := func(s string) bool { return strings.Contains(ddl, s) }
	if has("LowCardinality") != f.LowCardinality {
		t.Errorf("LowCardinality present=%v on %v", has("LowCardinality"), sc.Version)
	}
	if has("CODEC(") != f.Codecs {
		t.Errorf("CODEC present=%v on %v", has("CODEC("), sc.Version)
	}
	if wantTTL := f.TTL && sc.Retention > 0; has("TTL ") != wantTTL {
		t.Errorf("TTL present=%v, want %v", has("TTL "), wantTTL)
	}
	if sc.Retention > 0 && f.TTL && !has(fmt.Sprintf("INTERVAL %d SECOND", int64(sc.Retention.Seconds()))) {
		t.Error("TTL does not use the retention")
	}
	stmts := regexp.MustCompile(`(?m)^(CREATE|ALTER) [^\n]*`).FindAllString(ddl, -1)
	for _, s := range stmts {
		wantOn := sc.Cluster != "" && !sc.NodeLocal && !strings.Contains(s, "-- on every node") && !strings.Contains(s, "-- on one replica of each shard")
		if strings.Contains(s, " ON CLUSTER "+sc.Cluster) != wantOn {
			t.Errorf("%q: ON CLUSTER present=%v, want %v", s, !wantOn, wantOn)
		}
	}
	for _, table := range []string{TableRollups, TableHotKeys, TableStatements, TableAudit} {
		dist := has("CREATE TABLE IF NOT EXISTS qtop." + table + DistSuffix)
		if dist != (sc.Cluster != "") {
			t.Errorf("%s%s present=%v with cluster %q", table, DistSuffix, dist, sc.Cluster)
		}
	}
	if sc.Cluster != "" && !has("Distributed(main, qtop, rollups, cityHash64(tenant))") {
		t.Error("rollups are not sharded by tenant")
	}
	repl := strings.Count(ddl, "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/qtop/")
	if sc.Replicated && repl != 5 || !sc.Replicated && (repl != 0 || has("Replicated")) {
		t.Errorf("%d replicated engines with replicated=%v", repl, sc.Replicated)
	}
	if sc.Replicated && !has("'{replica}', version)") {
		t.Error("replicated rollups lose the version column")
	}
	if n := strings.Count(ddl, "ReplacingMergeTree(version)") + strings.Count(ddl, "'{replica}', version)"); n != 2 {
		t.Errorf("%d tables replace by version, want rollups and hot keys", n)
	}
	if !has("ORDER BY (tenant, minute, route, kind, service, writer)") || !has("ORDER BY (minute, key, writer)") {
		t.Error("sorting keys no longer hold the writer and the window")
	}
	alters := strings.Count(ddl, "ADD COLUMN")
	if want := map[bool]int{false: 1, true: 2}[sc.Cluster != ""]; alters != want {
		t.Errorf("%d ADD COLUMN, want %d", alters, want)
	}
	if has("IF NOT EXISTS active_session_seconds") != f.AddColumnIfNot {
		t.Error("ADD COLUMN IF NOT EXISTS rendered for a server without it, or missing")
	}
}

func TestSchemaValidate(t *testing.T) {
	for name, sc := range map[string]Schema{
		"database":               {Database: "q-top"},
		"empty database":         {},
		"cluster name":           {Database: "q", Cluster: "a b"},
		"replicated, no cluster": {Database: "q", Replicated: true},
		"short retention":        {Database: "q", Retention: time.Minute},
		"negative retention":     {Database: "q", Retention: -time.Hour},
		"injection":              {Database: "q; DROP TABLE x"},
	} {
		if err := sc.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", name, err)
		}
	}
	if err := (Schema{Database: "qtop", Cluster: "c_1", Replicated: true, Retention: time.Hour}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFeaturesOf(t *testing.T) {
	for _, c := range []struct {
		v    Version
		want Features
	}{
		{Version{18, 16}, Features{}},
		{Version{19, 3}, Features{LowCardinality: true}},
		{Version{19, 6}, Features{LowCardinality: true, TTL: true}},
		{Version{19, 11}, Features{LowCardinality: true, TTL: true, Codecs: true}},
		{Version{20, 1}, Features{LowCardinality: true, TTL: true, Codecs: true, AddColumnIfNot: true}},
		{Version{21, 11}, Features{LowCardinality: true, TTL: true, Codecs: true, AddColumnIfNot: true, AsyncInsert: true}},
		{Version{23, 3}, Features{LowCardinality: true, TTL: true, Codecs: true, AddColumnIfNot: true, AsyncInsert: true, ReplicatedDatabase: true, LightweightDelete: true}},
		{Version{25, 8}, Features{LowCardinality: true, TTL: true, Codecs: true, AddColumnIfNot: true, AsyncInsert: true, ReplicatedDatabase: true, LightweightDelete: true, ForegroundInsertName: true}},
	} {
		if got := FeaturesOf(c.v); got != c.want {
			t.Errorf("FeaturesOf(%v) = %+v, want %+v", c.v, got, c.want)
		}
	}
}
