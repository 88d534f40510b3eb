package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/store"
)

// storeDefaultNote is what every --store flag's help says of its default.
const storeDefaultNote = " (default: DuckDB in --data-dir, duckdb://DATA_DIR/" + collector.DefaultStoreFile + ")"

// storeFlags are a command's --store and the --data-dir its default
// lives in.
type storeFlags struct {
	url, dataDir *string
}

// newStoreFlags registers --store (help, then the default's note) and,
// unless dataDir is given (serve and erase have their own), a --data-dir
// that only locates the default store.
func newStoreFlags(fs *flag.FlagSet, envs *[]envFlag, help string, dataDir *string) storeFlags {
	f := storeFlags{url: strFlag(fs, envs, "store", "QTOP_STORE", "", help+storeDefaultNote), dataDir: dataDir}
	if f.dataDir == nil {
		f.dataDir = strFlag(fs, envs, "data-dir", "QTOP_DATA_DIR", collector.DefaultDataDir, "the collector's data dir, where the default store is")
	}
	return f
}

// resolve is the store to open: --store, else the default in --data-dir
// (or, as collectors kept it before, qtop.duckdb in the working
// directory, with a note on stderr). For a command that only reads
// (mustExist), a default DuckDB file that is not there is an error that
// says what to pass, rather than an empty store made on the spot.
func (f storeFlags) resolve(cmd string, mustExist bool, stderr io.Writer) (string, error) {
	if *f.url != "" {
		return *f.url, nil
	}
	u, legacy := collector.DefaultStoreURL(*f.dataDir)
	if legacy {
		fmt.Fprintf(stderr, "collector %s: reading %s in the working directory, where collectors kept it before; the default is now --data-dir (%s): move the file there, or pass --store\n",
			cmd, collector.DefaultStoreFile, *f.dataDir)
	}
	if mustExist {
		p, _ := store.ParseURL(u)
		if _, err := os.Stat(p.Path); errors.Is(err, fs.ErrNotExist) {
			ask := ", or ask a running collector with --collector HOST:PORT"
			if cmd == "erase" {
				ask = "" // erase runs on a stopped collector's data
			}
			return "", fmt.Errorf("no store at %s (the default: DuckDB in --data-dir %s); pass the collector's --store or --data-dir%s", p.Path, *f.dataDir, ask)
		}
	}
	return u, nil
}
