package pgxcomment

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestOwnTx(t *testing.T) {
	for sql, want := range map[string]bool{
		"VACUUM pg_class":                               true,
		"  vacuum analyze t":                            true,
		"CREATE INDEX CONCURRENTLY i ON t (a)":          true,
		"create database x":                             true,
		"ALTER SYSTEM SET work_mem = '8MB'":             true,
		"REINDEX TABLE CONCURRENTLY t":                  true,
		"SELECT 1":                                      false,
		"UPDATE t SET a = 1":                            false,
		"CREATE TABLE t (a int)":                        false,
		"/* nightly */ VACUUM t":                        true,
		"-- nightly\nVACUUM t":                          true,
		"/* a /* nested */ one */\n ( vacuum":           true,
		"CALL p()":                                      true,
		"call p($1)":                                    true,
		"create\n  database x":                          true,
		"CREATE UNIQUE INDEX CONCURRENTLY i ON t (a)":   true,
		"ALTER TABLE t DETACH PARTITION p CONCURRENTLY": true,
		"select pg_sleep($1) as concurrently_updated":   false,
		"SELECT concurrently FROM t":                    false,
		"-- VACUUM\nSELECT 1":                           false,
		"/* unterminated VACUUM":                        false,
		"DISCARD ALL":                                   true,
		"DISCARD PLANS":                                 false,
		"COMMIT PREPARED 'x'":                           true,
		"COMMIT":                                        false,
		"DO $$ BEGIN COMMIT; END $$":                    true,
		"LOCK TABLE t":                                  true,
		"lock t in exclusive mode":                      true,
		"SAVEPOINT a":                                   true,
		"RELEASE SAVEPOINT a":                           true,
		"ROLLBACK TO SAVEPOINT a":                       true,
		"ROLLBACK":                                      false,
		"DECLARE c CURSOR FOR SELECT 1":                 true,
		"SET LOCAL work_mem = '8MB'":                    true,
		"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE":  true,
		"SET CONSTRAINTS ALL DEFERRED":                  true,
		"SET work_mem = '8MB'":                          false,
		"PREPARE TRANSACTION 'x'":                       true,
		"PREPARE q AS SELECT 1":                         false,
		"SELECT 1 AS do":                                false,
	} {
		if got := ownTx(sql); got != want {
			t.Errorf("ownTx(%q) = %v", sql, got)
		}
	}
}

func TestBeginSQL(t *testing.T) {
	for _, c := range []struct {
		o    pgx.TxOptions
		want string
	}{
		{pgx.TxOptions{}, "begin"},
		{pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly, DeferrableMode: pgx.Deferrable},
			"begin isolation level serializable read only deferrable"},
		{pgx.TxOptions{AccessMode: pgx.ReadWrite}, "begin read write"},
	} {
		if got := beginSQL(c.o); got != c.want {
			t.Errorf("beginSQL(%+v) = %q, want %q", c.o, got, c.want)
		}
	}
}
