package testsvc

import "testing"

// EnvRedis is the variable `scripts/services env` prints for Redis.
const EnvRedis = "QTOP_TEST_REDIS"

// Redis returns host:port of the test Redis server. Tests that use it
// give their keys a prefix of their own (the server is shared by every
// package's tests) and delete them when they end.
func Redis(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvRedis, "Redis")
}
