package chstore_test

import (
	"fmt"

	"github.com/qtop-dev/qtop/store/chstore"
)

// The schema Open would create on ClickHouse 18.16 for a sharded cluster,
// rendered without a server (here only the Distributed rollups table).
func ExampleSchema() {
	sc := chstore.Schema{Database: "qtop", Version: chstore.Version{Major: 18, Minor: 16}, Cluster: "main"}
	for _, m := range sc.Migrations()[:1] {
		fmt.Println(m.Steps[1].SQL)
	}
	// Output:
	// CREATE TABLE IF NOT EXISTS qtop.rollups_dist ON CLUSTER main AS qtop.rollups
	// ENGINE = Distributed(main, qtop, rollups, cityHash64(tenant))
}
