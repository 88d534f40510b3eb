package collector

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
)

// The ClickHouse store's user and password (default: user default, no
// password): in the environment, as they do not belong in a URL.
const (
	EnvClickHouseUser     = "QTOP_CLICKHOUSE_USER"
	EnvClickHousePassword = "QTOP_CLICKHOUSE_PASSWORD"
)

// OpenStore opens the store named by url (duckdb://PATH or
// clickhouse://HOST:PORT/DB), not yet wrapped in the spool. It is the one
// place that links the store implementations: library packages never
// link DuckDB.
func OpenStore(ctx context.Context, url string, cfg Config) (store.Store, error) {
	u, err := store.ParseURL(url)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch u.Scheme {
	case store.SchemeClickHouse:
		opts := []chstore.Option{chstore.WithLogger(cfg.Logger), chstore.WithRetention(cfg.Retention)}
		if cfg.Registerer != nil {
			opts = append(opts, chstore.WithRegisterer(cfg.Registerer))
		}
		if cfg.Cluster != "" {
			opts = append(opts, chstore.WithCluster(cfg.Cluster), chstore.WithReplicated())
		}
		// The URL's options: ?mode=explicit|replicated-database|cloud,
		// ?async_insert=1, ?secure=1; the user and password come from the
		// environment, never the URL.
		opts = append(opts, chstore.WithMode(chstore.Mode(u.Mode)))
		if u.AsyncInsert {
			opts = append(opts, chstore.WithAsyncInsert())
		}
		if u.Secure {
			opts = append(opts, chstore.WithTLS(nil))
		}
		if user, pass := os.Getenv(EnvClickHouseUser), os.Getenv(EnvClickHousePassword); user != "" || pass != "" {
			if user == "" {
				user = "default"
			}
			opts = append(opts, chstore.WithAuth(user, pass))
		}
		st, err := chstore.Open(ctx, u.Addr, u.Database, opts...)
		if err != nil {
			return nil, fmt.Errorf("collector: open %s: %w", url, err)
		}
		return st, nil
	case store.SchemeDuckDB:
		return openDuck(u.Path, cfg)
	}
	return nil, fmt.Errorf("%w: store scheme %q", ErrConfig, u.Scheme)
}
