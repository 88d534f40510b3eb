package testsvc

import (
	"strings"
	"testing"
)

// EnvClickHouseCluster is printed by `scripts/services env` once
// `scripts/services up --cluster` has started the replicated cluster:
// NAME@HOST:PORT,HOST:PORT,… (the cluster name and every node's native
// address, in CLUSTER_NODES order: shard 1 replica 1, shard 1 replica 2, …).
const EnvClickHouseCluster = "QTOP_TEST_CLICKHOUSE_CLUSTER"

const clusterHint = `start the cluster with: ./scripts/services up --cluster && eval "$(./scripts/services env)" (./scripts/test does both)`

// ClickHouseCluster returns the name and the node addresses of the test
// ClickHouse cluster (2 shards × 2 replicas on ZooKeeper). A missing
// cluster fails the test where services are required and skips it
// elsewhere.
func ClickHouseCluster(t testing.TB) (name string, addrs []string) {
	t.Helper()
	v, err := ParseCluster(lookupHint(t, EnvClickHouseCluster, "the ClickHouse cluster", clusterHint))
	if err != nil {
		t.Fatalf("%s: %v", EnvClickHouseCluster, err)
	}
	return v.Name, v.Addrs
}

// Cluster is a parsed EnvClickHouseCluster value.
type Cluster struct {
	Name  string
	Addrs []string
}

// ParseCluster reads NAME@HOST:PORT,HOST:PORT,….
func ParseCluster(s string) (Cluster, error) {
	name, list, ok := strings.Cut(s, "@")
	if !ok || name == "" || list == "" {
		return Cluster{}, errBadCluster(s)
	}
	addrs := strings.Split(list, ",")
	for _, a := range addrs {
		if !strings.Contains(a, ":") {
			return Cluster{}, errBadCluster(s)
		}
	}
	return Cluster{Name: name, Addrs: addrs}, nil
}

type errBadCluster string

func (e errBadCluster) Error() string {
	return "testsvc: cluster " + string(e) + ": want NAME@HOST:PORT,HOST:PORT,…"
}
