package collector

import (
	"fmt"

	"github.com/qtop-dev/qtop/ingest/store"
)

// openDuck opens the embedded DuckDB store.
func openDuck(path string, cfg Config) (store.Store, error) {
	return nil, fmt.Errorf("%w: duckdb://%s: the DuckDB store is not linked into this build yet", ErrConfig, path)
}
