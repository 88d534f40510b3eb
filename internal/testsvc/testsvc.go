// Package testsvc hands integration tests the addresses of the real
// services started by scripts/services.
//
// When CI=true or QTOP_REQUIRE_SERVICES=1 a missing service fails the test;
// elsewhere the test is skipped with a message that says how to start it.
//
// Eventually (and Poll) is how such a test waits for a server, a process
// or a background goroutine: on a condition, with a deadline, never by
// sleeping a fixed time.
package testsvc

import (
	"os"
	"testing"
)

// Environment variables printed by `scripts/services env`.
const (
	EnvPostgres   = "QTOP_TEST_POSTGRES"
	EnvClickHouse = "QTOP_TEST_CLICKHOUSE"
)

const hint = `start the services with: ./scripts/services up && eval "$(./scripts/services env)" (./scripts/test does both)`

// Required reports whether a missing service must fail the test.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("QTOP_REQUIRE_SERVICES") == "1"
}

// Postgres returns the DSN of the test PostgreSQL server.
func Postgres(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvPostgres, "PostgreSQL")
}

// ClickHouse returns host:port of the test ClickHouse server's native port.
func ClickHouse(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvClickHouse, "ClickHouse")
}

func lookup(t testing.TB, env, name string) string {
	t.Helper()
	return lookupHint(t, env, name, hint)
}

func lookupHint(t testing.TB, env, name, hint string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	if Required() {
		t.Fatalf("%s is required here but %s is not set; %s", name, env, hint)
	}
	t.Skipf("%s not available (%s unset); %s", name, env, hint)
	return ""
}
