package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/qtop-dev/qtop/internal/collector"
)

// limitFlags bound what `collector serve` keeps: history, disk, and the
// memory that grows with the number of distinct tenants.
type limitFlags struct {
	diskReserve, retention    *string
	maxLiveTenants, maxMinute *string
	maxConns                  *string
}

func newLimitFlags(fs *flag.FlagSet, envs *[]envFlag) *limitFlags {
	return &limitFlags{
		retention:   strFlag(fs, envs, "retention", "QTOP_RETENTION", "0", "how long history is kept, e.g. 90d or 36h (at least 1h; 0: everything): older rollups, hot keys and statements are removed at start and then hourly (ClickHouse: a TTL from 19.6, old daily partitions dropped on every version; DuckDB: deleted)"),
		diskReserve: strFlag(fs, envs, "disk-reserve", "QTOP_DISK_RESERVE", strconv.Itoa(collector.DefaultDiskReserve), "bytes kept free on --data-dir's disk: below it reports are refused (503, Retry-After) until space comes back, so the disk never fills (0: none)"),
		maxLiveTenants: strFlag(fs, envs, "max-live-tenants", "QTOP_MAX_LIVE_TENANTS", strconv.Itoa(collector.DefaultMaxTenants),
			"tenants the live view follows at once (about 6.5 KB each busy on one route, 3.5 KB seen once); tenants beyond it count in one \"other\" row (qtop_collector_live_tenant_overflow_total) until idle ones are forgotten (130 s)"),
		maxMinute: strFlag(fs, envs, "max-minute-rows", "QTOP_MAX_MINUTE_ROWS", strconv.Itoa(collector.DefaultMaxMinuteRows),
			"tenant×route×kind rollup rows one open minute holds (about 0.55 KB each; two minutes are open around a minute's turn); rows beyond it are folded into tenant \"other\" (qtop_collector_rows_folded_total)"),
		maxConns: strFlag(fs, envs, "max-conns", "QTOP_MAX_CONNS", "0",
			fmt.Sprintf("connections the HTTP port keeps open at once (about 23 KB each idle; one per reporting process and viewer); at the bound the one idle the longest is closed to make room (qtop_collector_http_connections_closed_total) (0: half the open-file limit, at most %d)", collector.DefaultMaxConnsCeiling)),
	}
}

// apply puts the tenant bounds into cfg.
func (l *limitFlags) apply(cfg *collector.Config) error {
	for _, b := range []struct {
		name string
		v    *string
		dst  *int
	}{{"max-live-tenants", l.maxLiveTenants, &cfg.MaxTenants}, {"max-minute-rows", l.maxMinute, &cfg.MaxMinuteRows}} {
		n, err := strconv.Atoi(*b.v)
		if err != nil || n < 1 {
			return fmt.Errorf("--%s %q: want a number ≥ 1", b.name, *b.v)
		}
		*b.dst = n
	}
	n, err := strconv.Atoi(*l.maxConns)
	if err != nil || n < 0 {
		return fmt.Errorf("--max-conns %q: want a number of connections (0: half the open-file limit, at most %d)", *l.maxConns, collector.DefaultMaxConnsCeiling)
	}
	cfg.MaxConns = n
	return nil
}

// byteUnits are the suffixes parseBytes takes, longest first: SI (KB =
// 1000) and binary (KiB = 1024), as the help and DuckDB's memory_limit
// write sizes.
var byteUnits = []struct {
	suffix string
	n      int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"b", 1},
}

// parseBytes reads a size flag: a number of bytes, or a whole number
// with a unit ("256MiB", "64 MB", "1TB"); never negative.
func parseBytes(name, v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("--%s %q: want a number of bytes, such as 268435456 or 256MiB (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", name, v)
	}
	return n * mult, nil
}
