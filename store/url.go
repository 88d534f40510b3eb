package store

import (
	"errors"
	"fmt"
	"net"
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
}

// DefaultClickHouseDatabase is the database of a clickhouse:// URL without one.
const DefaultClickHouseDatabase = "qtop"

// ParseURL reads a --store value. duckdb://PATH takes a relative
// (duckdb://qtop.duckdb) or absolute (duckdb:///var/lib/qtop.duckdb) path;
// clickhouse://HOST:PORT/DB needs a port (9000 is the native default and
// is added when missing) and takes the database from the path.
func ParseURL(s string) (URL, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return URL{}, fmt.Errorf("%w %q: want duckdb://PATH or clickhouse://HOST:PORT/DB", ErrURL, s)
	}
	switch strings.ToLower(scheme) {
	case SchemeDuckDB:
		if rest == "" || strings.ContainsRune(rest, 0) {
			return URL{}, fmt.Errorf("%w %q: duckdb:// needs a file path", ErrURL, s)
		}
		return URL{Scheme: SchemeDuckDB, Path: rest}, nil
	case SchemeClickHouse:
		host, db, _ := strings.Cut(rest, "/")
		if i := strings.IndexAny(db, "?#"); i >= 0 {
			return URL{}, fmt.Errorf("%w %q: clickhouse:// takes no query or fragment", ErrURL, s)
		}
		if strings.Contains(host, "@") {
			return URL{}, fmt.Errorf("%w %q: credentials do not belong in the URL", ErrURL, s)
		}
		if host == "" {
			return URL{}, fmt.Errorf("%w %q: clickhouse:// needs HOST:PORT", ErrURL, s)
		}
		hosts := strings.Split(host, ",")
		if len(hosts) > MaxClickHouseHosts {
			return URL{}, fmt.Errorf("%w %q: at most %d hosts", ErrURL, s, MaxClickHouseHosts)
		}
		for i, h := range hosts {
			if h, err := clickHouseHost(h); err != nil {
				return URL{}, fmt.Errorf("%w %q: %s", ErrURL, s, err.Error())
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
			return URL{}, fmt.Errorf("%w %q: database name %q must be letters, digits and _", ErrURL, s, db)
		}
		return URL{Scheme: SchemeClickHouse, Addr: host, Database: db}, nil
	default:
		return URL{}, fmt.Errorf("%w %q: unknown scheme %q (duckdb or clickhouse)", ErrURL, s, scheme)
	}
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
		return "duckdb://" + u.Path
	case SchemeClickHouse:
		return "clickhouse://" + u.Addr + "/" + u.Database
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
