//go:build noduckdb

package collector

import (
	"fmt"

	"github.com/qtop-dev/qtop/store"
)

// openDuck refuses: this collector was built with -tags noduckdb (a static
// binary without cgo, for ClickHouse-only deployments).
func openDuck(path, _ string, _ Config) (store.Store, error) {
	return nil, fmt.Errorf("%w: duckdb://%s: this collector was built without DuckDB (-tags noduckdb); use --store clickhouse://HOST:9000/DB or --store none", ErrConfig, path)
}
