package collector

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store/chstore"
)

// TestStoreNodeWithoutSchema: a collector on the cluster names a node that
// answers without qtop's tables (a node rebuilt empty; here its
// schema_migrations detached), in its log once and in
// qtop_collector_store_nodes_without_schema, and says when it has them
// again.
func TestStoreNodeWithoutSchema(t *testing.T) {
	name, addrs := testsvc.ClickHouseCluster(t)
	db := fmt.Sprintf("qtop_nodes_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := func(i int) clickhouse.Conn {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addrs[i]}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	t.Cleanup(func() { node(0).Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" ON CLUSTER "+name) })
	var logs lockedBuffer
	reg := prometheus.NewRegistry()
	s, err := New(Config{Listen: "127.0.0.1:0", Store: "clickhouse://" + strings.Join(addrs, ",") + "/" + db,
		FleetConfig: FleetConfig{Cluster: name}, Token: "t", DataDir: t.TempDir(), Writer: "c0", Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if s.nodes == nil {
		t.Fatal("no node check on a cluster store")
	}
	gauge := func() float64 {
		return testutil.ToFloat64(s.nodes.gauge)
	}
	s.nodes.once(ctx)
	if g := gauge(); g != 0 {
		t.Fatalf("whole cluster: gauge %v", g)
	}
	rebuilt := node(3)
	table := db + "." + chstore.TableMigrations
	if err := rebuilt.Exec(ctx, "DETACH TABLE "+table); err != nil {
		t.Fatal(err)
	}
	attached := false
	defer func() {
		if !attached {
			rebuilt.Exec(context.Background(), "ATTACH TABLE "+table)
		}
	}()
	s.nodes.once(ctx)
	s.nodes.once(ctx)
	if g := gauge(); g != 1 {
		t.Fatalf("with %s rebuilt: gauge %v, want 1", addrs[3], g)
	}
	if n := logs.count("answers without qtop's tables"); n != 1 || logs.count("node="+addrs[3]) != 1 {
		t.Fatalf("logged %d times, want once naming node=%s", n, addrs[3])
	}
	if err := rebuilt.Exec(ctx, "ATTACH TABLE "+table); err != nil {
		t.Fatal(err)
	}
	attached = true
	s.nodes.once(ctx)
	if g := gauge(); g != 0 || logs.count("the node has qtop's tables again") != 1 {
		t.Fatalf("with the tables back: gauge %v, %d lines saying so", g, logs.count("the node has qtop's tables again"))
	}
}
