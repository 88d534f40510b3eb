//go:build !noduckdb

package collector

import (
	"fmt"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/duckstore"
)

// openDuck opens the embedded DuckDB store (cgo; linked only here, in
// application code).
func openDuck(path, memory string, cfg Config) (store.Store, error) {
	if memory == "" {
		memory = DefaultDuckDBMemory
	}
	st, err := duckstore.Open(path, duckstore.WithLogger(cfg.Logger), duckstore.WithRegisterer(cfg.Registerer),
		duckstore.WithMemoryLimit(memory))
	if err != nil {
		return nil, fmt.Errorf("collector: open duckdb://%s: %w", path, err)
	}
	return st, nil
}
