package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
)

// OpenStore opens the store named by url (duckdb://PATH or
// clickhouse://HOST:PORT/DB), not yet wrapped in the spool. It is the one
// place that links the store implementations: library packages never
// link DuckDB. ClickHouse's user, password and TLS files come from the
// environment (ClickHouseAuthFromEnv; see engines.go).
func OpenStore(ctx context.Context, url string, cfg Config) (store.Store, error) {
	return openStore(ctx, url, cfg, false)
}

// OpenExistingStore is OpenStore for a command that reads or erases (a
// cost report, the audit, erase): a store that is not there — a DuckDB
// file, a ClickHouse database — is an error that names it, rather than
// one made empty on the spot (a misspelt --store read as an empty bill).
func OpenExistingStore(ctx context.Context, url string, cfg Config) (store.Store, error) {
	return openStore(ctx, url, cfg, true)
}

func openStore(ctx context.Context, url string, cfg Config, existing bool) (store.Store, error) {
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
		// ?async_insert=1, ?secure=1; the user, password and TLS files
		// come from the environment, never the URL.
		opts = append(opts, chstore.WithMode(chstore.Mode(u.Mode)))
		if existing {
			opts = append(opts, chstore.WithExisting())
		}
		if u.AsyncInsert {
			opts = append(opts, chstore.WithAsyncInsert())
		}
		auth, err := ClickHouseAuthFromEnv()
		if err != nil {
			return nil, err
		}
		// No ServerName: the dialer verifies each node of a multi-host
		// URL for the name in its own address.
		tc, err := auth.tlsConfig(u.Secure, "", "the store URL has no ?secure=1")
		if err != nil {
			return nil, err
		}
		if tc != nil {
			opts = append(opts, chstore.WithTLS(tc))
		}
		if auth.User != "" || auth.Password != "" {
			if auth.User == "" {
				auth.User = "default"
			}
			opts = append(opts, chstore.WithAuth(auth.User, auth.Password))
		}
		cfg.Logger.Debug("opening the ClickHouse store", "store", u.String(), "auth", auth)
		st, err := chstore.Open(ctx, u.Addr, u.Database, opts...)
		if err != nil {
			return nil, fmt.Errorf("collector: open %s: %w", u.String(), auth.engineHint(err, u.Secure))
		}
		return st, nil
	case store.SchemeDuckDB:
		if _, err := os.Stat(u.Path); existing && errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("collector: no store at %s: check --store (a collector that writes there makes it)", u.Path)
		}
		return openDuck(u.Path, u.MemoryLimit, cfg)
	}
	return nil, fmt.Errorf("%w: store scheme %q", ErrConfig, u.Scheme)
}
