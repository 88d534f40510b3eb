package chstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// TestDDLModesGolden renders the modes and replica paths the local
// servers cannot all run (a Replicated database, Cloud, {uuid} paths) and
// compares them with testdata/ (go test -update rewrites); the rules each
// must follow are checked too.
func TestDDLModesGolden(t *testing.T) {
	for _, c := range []struct {
		file  string
		sc    Schema
		has   []string
		hasnt []string
	}{
		{"ddl_24.8_replicated_database_ttl0d.sql",
			Schema{Database: "qtop", Version: Version{24, 8}, Cluster: "main", Mode: ModeReplicatedDatabase},
			[]string{"CREATE DATABASE IF NOT EXISTS qtop ON CLUSTER main ENGINE = Replicated('/clickhouse/databases/qtop', '{shard}', '{replica}')",
				"ENGINE = ReplicatedReplacingMergeTree(version)", "ENGINE = Distributed(qtop, qtop, rollups, cityHash64(tenant))",
				"ALTER TABLE qtop.rollups_dist ADD COLUMN IF NOT EXISTS"},
			[]string{"/clickhouse/tables", "CREATE TABLE IF NOT EXISTS qtop.rollups ON CLUSTER", "-- on "}},
		{"ddl_24.8_cloud_ttl90d.sql",
			Schema{Database: "qtop", Version: Version{24, 8}, Mode: ModeCloud, Retention: 90 * 24 * time.Hour},
			[]string{"ENGINE = ReplacingMergeTree(version)", "TTL minute + INTERVAL 7776000 SECOND", "LowCardinality(String)"},
			[]string{"ON CLUSTER", "Replicated", "Distributed", "'/"}},
		{"ddl_24.8_cluster_replicated_uuid_ttl0d.sql",
			Schema{Database: "qtop", Version: Version{24, 8}, Cluster: "main", Replicated: true, UUIDPaths: true},
			[]string{"ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', version)", "ON CLUSTER main"},
			[]string{"/clickhouse/tables/{shard}/qtop"}},
		{"ddl_18.16_cluster_replicated_incarnation_ttl0d.sql",
			Schema{Database: "qtop", Version: Version{18, 16}, Cluster: "main", Replicated: true, Incarnation: "mj3k9x2"},
			[]string{"ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/qtop/rollups/mj3k9x2', '{replica}', version)", "ON CLUSTER main"},
			[]string{"{uuid}", "LowCardinality"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			if err := c.sc.Validate(); err != nil {
				t.Fatal(err)
			}
			got := c.sc.DDL()
			for _, s := range c.has {
				if !strings.Contains(got, s) {
					t.Errorf("lacks %q", s)
				}
			}
			for _, s := range c.hasnt {
				if strings.Contains(got, s) {
					t.Errorf("has %q", s)
				}
			}
			path := filepath.Join("testdata", c.file)
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

func TestModeValidate(t *testing.T) {
	for name, sc := range map[string]Schema{
		"unknown mode":                    {Database: "q", Mode: "aws"},
		"replicated database, no cluster": {Database: "q", Mode: ModeReplicatedDatabase},
		"replicated database, node-local": {Database: "q", Mode: ModeReplicatedDatabase, Cluster: "c", NodeLocal: true},
		"cloud with a cluster":            {Database: "q", Mode: ModeCloud, Cluster: "c"},
		"cloud, replicated":               {Database: "q", Mode: ModeCloud, Replicated: true},
		"incarnation":                     {Database: "q", Incarnation: "a/b"},
	} {
		if err := sc.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", name, err)
		}
	}
	if _, err := ParseMode("replicated"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseMode(replicated) = %v", err)
	}
}

// TestSettingsByVersion states the settings each server gets.
func TestSettingsByVersion(t *testing.T) {
	for _, c := range []struct {
		sc    Schema
		async bool
		want  string
	}{
		{Schema{Version: Version{18, 16}}, true, ""},
		{Schema{Version: Version{18, 16}, Cluster: "c"}, true, "insert_distributed_sync=1"},
		{Schema{Version: Version{23, 8}, Cluster: "c"}, false, "insert_distributed_sync=1"},
		{Schema{Version: Version{23, 10}, Cluster: "c"}, true, "async_insert=1 distributed_foreground_insert=1 wait_for_async_insert=1"},
		{Schema{Version: Version{24, 8}, Mode: ModeReplicatedDatabase, Cluster: "c"}, false, "distributed_foreground_insert=1"},
		{Schema{Version: Version{24, 8}, Mode: ModeCloud}, true, "async_insert=1 wait_for_async_insert=1"},
		{Schema{Version: Version{21, 8}}, true, ""},
	} {
		var got []string
		for k, v := range c.sc.InsertSettings(c.async) {
			got = append(got, k+"="+strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(toString(v), "\n", ""), " ", "")))
		}
		sortStrings(got)
		if strings.Join(got, " ") != c.want {
			t.Errorf("%v %s cluster %q async %v: %q, want %q", c.sc.Version, c.sc.mode(), c.sc.Cluster, c.async, strings.Join(got, " "), c.want)
		}
	}
	for _, c := range []struct {
		v    Version
		want string
	}{
		{Version{18, 16}, `ALTER TABLE q.rollups DELETE WHERE tenant = 'o\'ha\\re'`},
		{Version{23, 3}, `DELETE FROM q.rollups WHERE tenant = 'o\'ha\\re'`},
	} {
		if got := (Schema{Database: "q", Version: c.v}).DeleteTenantSQL(TableRollups, `o'ha\re`); got != c.want {
			t.Errorf("%v: %s, want %s", c.v, got, c.want)
		}
	}
}

func toString(v any) string { return fmt.Sprint(v) }

func sortStrings(s []string) { slices.Sort(s) }

// TestOpenModes opens the store on the 18.16 server in the modes it can
// take: detected (explicit), Cloud's (one server's tables, engines without
// arguments; async inserts asked for and left out with a warning), and
// refuses the Replicated database, which 18.16 does not have.
func TestOpenModes(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		want Mode
	}{
		{"detected", nil, ModeExplicit},
		{"cloud", []Option{WithMode(ModeCloud), WithAsyncInsert()}, ModeCloud},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, addr, db := openTest(t, c.opts...)
			if got := s.Schema().Mode; got != c.want {
				t.Fatalf("mode %q, want %q", got, c.want)
			}
			rows := []store.Rollup{storetest.Row(0, "w1", "acme", "/r", 1), storetest.Row(1, "w1", "acme", "/r", 1)}
			if err := s.WriteRollups(context.Background(), rows); err != nil {
				t.Fatal(err)
			}
			from, to := storetest.T0, storetest.T0.Add(time.Hour)
			u, err := s.Usage(context.Background(), from, to, false)
			if err != nil {
				t.Fatal(err)
			}
			storetest.CheckUsage(t, u, storetest.ExpectUsage(rows, from, to, false))
			if _, err := Open(context.Background(), addr, db, WithMode(ModeReplicatedDatabase), WithCluster("qtop")); !errors.Is(err, ErrConfig) {
				t.Fatalf("replicated-database on 18.16: %v, want ErrConfig", err)
			}
		})
	}
	if _, err := Open(context.Background(), "127.0.0.1:1", "q", WithMode("aws")); !errors.Is(err, ErrConfig) {
		t.Fatalf("unknown mode: %v, want ErrConfig", err)
	}
}
