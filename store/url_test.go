package store

import (
	"errors"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want URL
	}{
		{"duckdb://qtop.duckdb", URL{Scheme: SchemeDuckDB, Path: "qtop.duckdb"}},
		{"duckdb:///var/lib/qtop/q.duckdb", URL{Scheme: SchemeDuckDB, Path: "/var/lib/qtop/q.duckdb"}},
		{"DuckDB://a/b.db", URL{Scheme: SchemeDuckDB, Path: "a/b.db"}},
		{"duckdb:///q.duckdb?memory_limit=512MB", URL{Scheme: SchemeDuckDB, Path: "/q.duckdb", MemoryLimit: "512MB"}},
		{"duckdb://q.duckdb?memory_limit=1.5GiB", URL{Scheme: SchemeDuckDB, Path: "q.duckdb", MemoryLimit: "1.5GiB"}},
		{"clickhouse://127.0.0.1:9000/qtop", URL{Scheme: SchemeClickHouse, Addr: "127.0.0.1:9000", Database: "qtop"}},
		{"clickhouse://ch.internal/metrics", URL{Scheme: SchemeClickHouse, Addr: "ch.internal:9000", Database: "metrics"}},
		{"clickhouse://localhost:9440", URL{Scheme: SchemeClickHouse, Addr: "localhost:9440", Database: "qtop"}},
		{"clickhouse://[::1]:9000/q_1/", URL{Scheme: SchemeClickHouse, Addr: "[::1]:9000", Database: "q_1"}},
		{"clickhouse://[::1]/q", URL{Scheme: SchemeClickHouse, Addr: "[::1]:9000", Database: "q"}},
		{"clickhouse://ch1:19000,ch2,[::1]:9001/q", URL{Scheme: SchemeClickHouse, Addr: "ch1:19000,ch2:9000,[::1]:9001", Database: "q"}},
		{"clickhouse://ch:9000/q?mode=cloud", URL{Scheme: SchemeClickHouse, Addr: "ch:9000", Database: "q", Mode: "cloud"}},
		{"clickhouse://ch/q?async_insert=1&mode=replicated-database", URL{Scheme: SchemeClickHouse, Addr: "ch:9000", Database: "q", Mode: "replicated-database", AsyncInsert: true}},
		{"clickhouse://ch?mode=explicit&async_insert=0", URL{Scheme: SchemeClickHouse, Addr: "ch:9000", Database: "qtop", Mode: "explicit"}},
		{"clickhouse://x.cloud:9440/q?mode=cloud&secure=1", URL{Scheme: SchemeClickHouse, Addr: "x.cloud:9440", Database: "q", Mode: "cloud", Secure: true}},
	} {
		got, err := ParseURL(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if again, err := ParseURL(got.String()); err != nil || again != got {
			t.Errorf("ParseURL(%q.String()) = %+v, %v", c.in, again, err)
		}
	}
	for _, bad := range []string{
		"", "qtop.duckdb", "duckdb://", "duckdb://?memory_limit=1GB", "duckdb://q?memory_limit=", "duckdb://q?memory_limit=lots",
		"duckdb://q?memory_limit=1GB'; DROP", "duckdb://q?threads=4", "duckdb://q?memory_limit=1..5GB", "duckdb://q?memory_limit=10KB", "duckdb://q?memory_limit=63MiB", "postgres://x/y", "clickhouse://", "clickhouse:///db",
		"clickhouse://h:9000/my-db", "clickhouse://h:9000/db?x=1", "clickhouse://u:p@h:9000/db",
		"clickhouse://::1/db", "clickhouse://h:9000/1db", "clickhouse://:9000/db",
		"clickhouse://h1:9000,/db", "clickhouse://,h/db", "clickhouse://h/db?mode=aws", "clickhouse://h/db?mode=cloud&mode=cloud",
		"clickhouse://h/db?async_insert=yes", "clickhouse://h/db?secure=2", "clickhouse://h/db?", "clickhouse://h/db?mode=cloud#x", "clickhouse://h/db#x", "clickhouse://h1," + strings.Repeat("h,", MaxClickHouseHosts) + "h/db",
	} {
		if u, err := ParseURL(bad); !errors.Is(err, ErrURL) {
			t.Errorf("ParseURL(%q) = %+v, %v; want ErrURL", bad, u, err)
		}
	}
}

// TestParseURLHidesCredentials: a URL refused for the user and password
// in it, or for anything else while it holds them, is not echoed with
// them (the error goes to the log), and the refusal says where they go.
func TestParseURLHidesCredentials(t *testing.T) {
	for _, c := range []struct{ in, says string }{
		{"clickhouse://qtop:hunter2@ch1:9440/qtop?secure=1", "QTOP_CLICKHOUSE_PASSWORD"},
		{"clickhouse://qtop:hun/ter2@ch1:9000/qtop", "QTOP_CLICKHOUSE_PASSWORD"},
		{"clickhouse://:hunter2@ch1:9000/qtop", "QTOP_CLICKHOUSE_PASSWORD"},
		{"clickhouse://qtop:hunter2@ch1:9000/qtop?mode=aws", "mode"},
		{"qtop:hunter2@ch1:9000/qtop", "clickhouse://HOST:PORT/DB"},
		{"postgres://qtop:hunter2@db/qtop", "unknown scheme"},
	} {
		_, err := ParseURL(c.in)
		if !errors.Is(err, ErrURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrURL", c.in, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "hun/") || !strings.Contains(msg, c.says) {
			t.Errorf("ParseURL(%q): %q; want it to say %q and not the password", c.in, msg, c.says)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"duckdb://q.db", "clickhouse://h:9000/db", "clickhouse://[::1]/x", "x://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURL(s)
		if err != nil {
			if !errors.Is(err, ErrURL) {
				t.Fatalf("error %v is not ErrURL", err)
			}
			return
		}
		again, err := ParseURL(u.String())
		if err != nil || again != u {
			t.Fatalf("%q parsed to %+v, which renders %q and parses to %+v, %v", s, u, u.String(), again, err)
		}
		if u.Scheme == SchemeClickHouse && !ValidIdent(u.Database) {
			t.Fatalf("database %q is not a plain identifier", u.Database)
		}
	})
}
