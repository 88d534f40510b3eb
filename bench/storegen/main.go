// Command storegen fills a store with a synthetic history of many tenants
// (storetest.History: most tenants idle most minutes, Zipf-like activity
// and load, several routes, services and kinds, latency histograms),
// written through the store's own WriteRollups as the collector writes
// it, then times the reads the collector serves over it: one tenant's
// history over a day and the cost report over the whole range. With
// -load (DuckDB only, into a new file) the rows go through duckstore's
// Load instead: the layout the writes leave, in minutes instead of hours
// for a week of 10,000 tenants.
//
//	go run ./storegen -store duckdb:///tmp/qtop-10k.duckdb -tenants 10000 -days 1
//	go run ./storegen -store duckdb:///tmp/qtop-10k-7d.duckdb -tenants 10000 -days 7 -load
//	go run ./storegen -store clickhouse://127.0.0.1:9000/qtop_gen -tenants 10000 -days 7
//	go run ./storegen -store duckdb:///tmp/qtop-10k.duckdb -tenants 10000 -days 7 -read-only
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/store/duckstore"
	"github.com/qtop-dev/qtop/store/storetest"
)

func main() {
	url := flag.String("store", "", "duckdb://PATH or clickhouse://HOST:PORT/DB (required)")
	tenants := flag.Int("tenants", 10000, "distinct tenants")
	days := flag.Int("days", 1, "days of history, ending at the start of today (UTC)")
	active := flag.Float64("active", 0.1, "mean fraction of tenants with load in a minute")
	skew := flag.Float64("skew", 1.1, "Zipf-like exponent of activity and load over the tenants")
	writers := flag.Int("writers", 2, "collectors that wrote the rows")
	batch := flag.Int("batch", 50000, "rows per WriteRollups call (whole minutes)")
	seed := flag.Uint64("seed", 1, "random seed: the same flags give the same rows")
	readOnly := flag.Bool("read-only", false, "do not write: only time the reads over what the store holds")
	reads := flag.Int("reads", 5, "times each read is repeated")
	load := flag.Bool("load", false, "DuckDB: fill a new file with duckstore's Load, not WriteRollups")
	flag.Parse()
	if *url == "" || *days <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	to := time.Now().UTC().Truncate(24 * time.Hour)
	h := storetest.History{Tenants: *tenants, From: to.AddDate(0, 0, -*days), Minutes: *days * 1440,
		Active: *active, Skew: *skew, Writers: *writers, Seed: *seed}
	if err := run(*url, h, *batch, *readOnly, *load, *reads); err != nil {
		fmt.Fprintln(os.Stderr, "storegen:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, url string) (store.Store, error) {
	u, err := store.ParseURL(url)
	if err != nil {
		return nil, err
	}
	if u.Scheme == store.SchemeClickHouse {
		return chstore.Open(ctx, u.Addr, u.Database, chstore.WithMode(chstore.Mode(u.Mode)))
	}
	return duckstore.Open(u.Path)
}

func run(url string, h storetest.History, batch int, readOnly, load bool, reads int) error {
	ctx := context.Background()
	st, err := open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	if !readOnly {
		start, n := time.Now(), 0
		if err := write(ctx, st, h, batch, load, &n); err != nil {
			return err
		}
		el := time.Since(start)
		fmt.Printf("wrote %d rollups (%d tenants × %d minutes) in %v: %.0f rows/s\n",
			n, h.Tenants, h.Minutes, el.Round(time.Millisecond), float64(n)/el.Seconds())
	}
	if err := sumHours(ctx, st, readOnly); err != nil {
		return err
	}
	to := h.From.Add(time.Duration(h.Minutes) * time.Minute)
	dayFrom := to.Add(-24 * time.Hour)
	for _, name := range []string{"tenant-00000", fmt.Sprintf("tenant-%05d", h.Tenants/2), fmt.Sprintf("tenant-%05d", h.Tenants-1)} {
		var rows int
		d, err := timed(reads, func() error {
			hs, err := st.History(ctx, name, dayFrom, to)
			rows = len(hs)
			return err
		})
		if err != nil {
			return err
		}
		fmt.Printf("history %s over the last day (%d minutes with load): median %v, min %v\n", name, rows, d[len(d)/2], d[0])
	}
	// The whole range (whole days), and one that starts and ends inside an
	// hour, as "collector report --from 7d" asks at any time of day.
	for _, r := range [][2]time.Time{{h.From, to}, {h.From.Add(37 * time.Minute), to.Add(-23 * time.Minute)}} {
		for _, byRoute := range []bool{false, true} {
			var lines int
			d, err := timed(reads, func() error {
				us, err := st.Usage(ctx, r[0], r[1], byRoute)
				lines = len(us)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Printf("usage %s – %s by route %v (%d lines): median %v, min %v\n", r[0].Format("01-02 15:04"), r[1].Format("01-02 15:04"),
				byRoute, lines, d[len(d)/2], d[0])
		}
	}
	return nil
}

// sumHours has a ClickHouse store sum the closed hours still due (its
// writes sum one round a minute as they go; an hour is due once it went
// unwritten for 30 s), as the collector's next writes would, so the reads
// are timed over the store a running collector keeps. In -read-only mode
// this sums a database written before the sums existed.
func sumHours(ctx context.Context, st store.Store, readOnly bool) error {
	sh, ok := st.(interface {
		SumHours(context.Context) (int, error)
	})
	if !ok {
		return nil
	}
	if !readOnly {
		fmt.Println("waiting 31 s: an hour is summed once it went unwritten for 30 s")
		time.Sleep(31 * time.Second)
	}
	start := time.Now()
	n, err := sh.SumHours(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("summed %d hours in %v\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}

// write writes h's rows to st, through WriteRollups or, with load, through
// duckstore's Load; n counts them.
func write(ctx context.Context, st store.Store, h storetest.History, batch int, load bool, n *int) error {
	if !load {
		return h.Generate(batch, func(rows []store.Rollup) error {
			*n += len(rows)
			return st.WriteRollups(ctx, rows)
		})
	}
	ds, ok := st.(*duckstore.Store)
	if !ok {
		return fmt.Errorf("-load fills DuckDB files only")
	}
	return ds.Load(ctx, func(add func([]store.Rollup) error) error {
		return h.Generate(batch, func(rows []store.Rollup) error {
			*n += len(rows)
			return add(rows)
		})
	})
}

// timed runs fn n times and returns the durations, sorted.
func timed(n int, fn func() error) ([]time.Duration, error) {
	var d []time.Duration
	for range max(n, 1) {
		start := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	return d, nil
}
