package store

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// URL schemes accepted by ParseURL.
const (
	SchemeDuckDB     = "duckdb"
	SchemeClickHouse = "clickhouse"
)

// URL is a parsed --store value: duckdb://PATH or clickhouse://HOST:PORT/DB.
// A ClickHouse URL may name several hosts, clickhouse://H1:9000,H2:9000/DB
// (nodes of one cluster, tried in order when one is down).
type URL struct {
	Scheme   string // SchemeDuckDB or SchemeClickHouse
	Path     string // duckdb: the database file
	Addr     string // clickhouse: host:port of the native protocol (several: comma-separated)
	Database string // clickhouse: the database, "qtop" when the URL names none
	// Mode is clickhouse's ?mode= option: how the deployment is run
	// (ClickHouseModes; "" detects it).
	Mode string
	// AsyncInsert is clickhouse's ?async_insert=1 option: the server
	// gathers many small inserts into one part (many small collectors).
	AsyncInsert bool
	// Secure is clickhouse's ?secure=1 option: TLS (port 9440 is the
	// native protocol's secure port; ClickHouse Cloud takes only that).
	Secure bool
	// MemoryLimit is duckdb's ?memory_limit= option: how much memory
	// DuckDB may take for its buffers and queries (a size as DuckDB
	// writes it: 512MB, 2GiB); "" leaves the opener's default.
	MemoryLimit string
}

// ClickHouseModes are the values of a clickhouse:// URL's mode option:
// qtop's explicit layout (ON CLUSTER, Replicated… engines with ZooKeeper
// paths), a Replicated database, or ClickHouse Cloud (engines without
// arguments, no ON CLUSTER). store/chstore says what each renders.
var ClickHouseModes = []string{"explicit", "replicated-database", "cloud"}

// DefaultClickHouseDatabase is the database of a clickhouse:// URL without one.
const DefaultClickHouseDatabase = "qtop"

// ParseURL reads a --store value. duckdb://PATH takes a relative
// (duckdb://qtop.duckdb) or absolute (duckdb:///var/lib/qtop.duckdb) path
// and the option memory_limit=SIZE (duckdb://qtop.duckdb?memory_limit=2GB);
// clickhouse://HOST:PORT/DB needs a port (9000 is the native default and
// is added when missing) and takes the database from the path, and
// options after ?: mode=explicit|replicated-database|cloud,
// async_insert=1 and secure=1 (each also =0), e.g.
// clickhouse://abc.clickhouse.cloud:9440/qtop?mode=cloud&secure=1.
func ParseURL(s string) (URL, error) {
	shown := shownURL(s)
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return URL{}, fmt.Errorf("%w %q: want duckdb://PATH or clickhouse://HOST:PORT/DB", ErrURL, shown)
	}
	switch strings.ToLower(scheme) {
	case SchemeDuckDB:
		path, query, hasQuery := strings.Cut(rest, "?")
		if path == "" || strings.ContainsRune(rest, 0) {
			return URL{}, fmt.Errorf("%w %q: duckdb:// needs a file path", ErrURL, shown)
		}
		u := URL{Scheme: SchemeDuckDB, Path: path}
		if hasQuery {
			k, v, _ := strings.Cut(query, "=")
			if k != "memory_limit" || !memorySize(v) {
				return URL{}, fmt.Errorf("%w %q: duckdb:// takes one option, ?memory_limit=SIZE of 64MiB or more (such as 512MB or 2GiB)", ErrURL, shown)
			}
			u.MemoryLimit = v
		}
		return u, nil
	case SchemeClickHouse:
		rest, query, hasQuery := strings.Cut(rest, "?")
		host, db, _ := strings.Cut(rest, "/")
		if strings.ContainsRune(rest, '#') || strings.ContainsRune(query, '#') {
			return URL{}, fmt.Errorf("%w %q: clickhouse:// takes no fragment", ErrURL, shown)
		}
		var opts URL
		if hasQuery {
			var err error
			if opts, err = clickHouseOptions(query); err != nil {
				return URL{}, fmt.Errorf("%w %q: %s", ErrURL, shown, err.Error())
			}
		}
		if strings.Contains(rest, "@") {
			return URL{}, fmt.Errorf("%w %q: credentials do not belong in the URL: set QTOP_CLICKHOUSE_USER and QTOP_CLICKHOUSE_PASSWORD (or _PASSWORD_FILE)", ErrURL, shown)
		}
		if host == "" {
			return URL{}, fmt.Errorf("%w %q: clickhouse:// needs HOST:PORT", ErrURL, shown)
		}
		hosts := strings.Split(host, ",")
		if len(hosts) > MaxClickHouseHosts {
			return URL{}, fmt.Errorf("%w %q: at most %d hosts", ErrURL, shown, MaxClickHouseHosts)
		}
		for i, h := range hosts {
			if h, err := clickHouseHost(h); err != nil {
				return URL{}, fmt.Errorf("%w %q: %s", ErrURL, shown, err.Error())
			} else {
				hosts[i] = h
			}
		}
		host = strings.Join(hosts, ",")
		db = strings.TrimSuffix(db, "/")
		if db == "" {
			db = DefaultClickHouseDatabase
		}
		if !validIdent(db) {
			return URL{}, fmt.Errorf("%w %q: database name %q must be letters, digits and _", ErrURL, shown, db)
		}
		return URL{Scheme: SchemeClickHouse, Addr: host, Database: db, Mode: opts.Mode, AsyncInsert: opts.AsyncInsert, Secure: opts.Secure}, nil
	default:
		return URL{}, fmt.Errorf("%w %q: unknown scheme %q (duckdb or clickhouse)", ErrURL, shown, scheme)
	}
}

// shownURL is s as errors show it: whatever comes between the scheme and
// the last @ (a user and password, which do not belong there) replaced by
// ***, so that a refused URL puts no credential in a log.
func shownURL(s string) string {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return s
	}
	scheme, _, ok := strings.Cut(s[:at], "://")
	if !ok {
		return "***" + s[at:]
	}
	return scheme + "://***" + s[at:]
}

// clickHouseOptions reads the options of a clickhouse:// URL (each once).
func clickHouseOptions(query string) (URL, error) {
	var u URL
	seen := map[string]bool{}
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if seen[k] {
			return URL{}, fmt.Errorf("option %q given twice", k)
		}
		seen[k] = true
		switch k {
		case "mode":
			if !slices.Contains(ClickHouseModes, v) {
				return URL{}, fmt.Errorf("mode %q: want one of %s", v, strings.Join(ClickHouseModes, ", "))
			}
			u.Mode = v
		case "async_insert", "secure":
			var on bool
			switch v {
			case "1", "true":
				on = true
			case "0", "false":
			default:
				return URL{}, fmt.Errorf("%s %q: want 1 or 0", k, v)
			}
			if k == "secure" {
				u.Secure = on
			} else {
				u.AsyncInsert = on
			}
		default:
			return URL{}, fmt.Errorf("unknown option %q (mode, async_insert, secure)", k)
		}
	}
	return u, nil
}

// MaxClickHouseHosts bounds the hosts of one clickhouse:// URL.
const MaxClickHouseHosts = 64

// clickHouseHost checks one HOST[:PORT] of a clickhouse:// URL and adds the
// native port 9000 when it has none.
func clickHouseHost(host string) (string, error) {
	if host == "" {
		return "", errors.New("clickhouse:// needs HOST:PORT")
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		if strings.Count(host, ":") > 1 && !strings.HasPrefix(host, "[") {
			return "", errors.New("put an IPv6 host in brackets")
		}
		host = net.JoinHostPort(strings.Trim(host, "[]"), "9000")
	}
	if h, p, _ := net.SplitHostPort(host); h == "" || p == "" {
		return "", errors.New("clickhouse:// needs HOST:PORT")
	}
	return host, nil
}

// String renders u back as a URL that ParseURL reads to the same value.
func (u URL) String() string {
	switch u.Scheme {
	case SchemeDuckDB:
		if u.MemoryLimit != "" {
			return "duckdb://" + u.Path + "?memory_limit=" + u.MemoryLimit
		}
		return "duckdb://" + u.Path
	case SchemeClickHouse:
		var opts []string
		if u.Mode != "" {
			opts = append(opts, "mode="+u.Mode)
		}
		if u.AsyncInsert {
			opts = append(opts, "async_insert=1")
		}
		if u.Secure {
			opts = append(opts, "secure=1")
		}
		s := "clickhouse://" + u.Addr + "/" + u.Database
		if len(opts) > 0 {
			s += "?" + strings.Join(opts, "&")
		}
		return s
	}
	return ""
}

// validIdent reports whether s is a plain SQL identifier, safe to splice
// into DDL unquoted.
func validIdent(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidIdent reports whether s is a plain identifier (letters, digits and
// _, not starting with a digit): what the stores accept for database and
// cluster names they splice into DDL.
func ValidIdent(s string) bool { return validIdent(s) }

// MinDuckDBMemory is the least ?memory_limit= a duckdb:// URL takes:
// below it DuckDB cannot pin the blocks it writes a minute with.
const MinDuckDBMemory = 64 << 20

// memorySize reports whether v is a size DuckDB's memory_limit takes (a
// number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, any case) of
// at least MinDuckDBMemory.
func memorySize(v string) bool {
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	if i == 0 || i > 12 || strings.Count(v[:i], ".") > 1 {
		return false
	}
	n, err := strconv.ParseFloat(v[:i], 64)
	unit := slices.Index([]string{"b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib"}, strings.ToLower(v[i:]))
	if err != nil || unit < 0 {
		return false
	}
	scale := [...]float64{1, 1e3, 1e6, 1e9, 1e12, 1 << 10, 1 << 20, 1 << 30, 1 << 40}[unit]
	return n*scale >= MinDuckDBMemory
}
