package testsvc

import "testing"

// Variables `scripts/services env` prints for the servers that require a
// password and TLS (a ClickHouse user with a password on the native
// protocol's secure port, a TLS-only Redis with requirepass and an ACL
// user), and the CA that signs both servers' certificates.
const (
	EnvTLSCA              = "QTOP_TEST_TLS_CA"
	EnvTLSClientCert      = "QTOP_TEST_TLS_CLIENT_CERT"
	EnvTLSClientKey       = "QTOP_TEST_TLS_CLIENT_KEY"
	EnvClickHouseSecure   = "QTOP_TEST_CLICKHOUSE_SECURE"
	EnvClickHouseUser     = "QTOP_TEST_CLICKHOUSE_USER"
	EnvClickHousePassword = "QTOP_TEST_CLICKHOUSE_PASSWORD"
	EnvRedisSecure        = "QTOP_TEST_REDIS_SECURE"
	EnvRedisUser          = "QTOP_TEST_REDIS_USER"
	EnvRedisPassword      = "QTOP_TEST_REDIS_PASSWORD"
)

// Secure is a server that requires a password over TLS.
type Secure struct {
	Addr     string // host:port of its TLS port
	User     string
	Password string
	CA       string // PEM file of the CA that signs its certificate
	// ClientCert and ClientKey are a client certificate that CA signed
	// (the Redis takes one, tls-auth-clients optional, but needs none).
	ClientCert, ClientKey string
}

// ClickHouseSecure returns the test ClickHouse's TLS port (the native
// protocol) with a user that needs a password. A missing variable fails
// the test where services are required and skips it elsewhere.
func ClickHouseSecure(t testing.TB) Secure {
	t.Helper()
	return secure(t, "ClickHouse with TLS and a password", EnvClickHouseSecure, EnvClickHouseUser, EnvClickHousePassword)
}

// RedisSecure returns the test Redis that takes only TLS, with an ACL
// user and its password. Tests give their keys a prefix of their own, as
// with Redis.
func RedisSecure(t testing.TB) Secure {
	t.Helper()
	return secure(t, "Redis with TLS and AUTH", EnvRedisSecure, EnvRedisUser, EnvRedisPassword)
}

func secure(t testing.TB, name, addr, user, pass string) Secure {
	t.Helper()
	return Secure{
		Addr:     lookup(t, addr, name),
		User:     lookup(t, user, name),
		Password: lookup(t, pass, name),
		CA:       lookup(t, EnvTLSCA, name),

		ClientCert: lookup(t, EnvTLSClientCert, name),
		ClientKey:  lookup(t, EnvTLSClientKey, name),
	}
}
