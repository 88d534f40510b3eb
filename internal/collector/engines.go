package collector

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/tlsfiles"
)

// How the collector logs in to its engines. Credentials come from the
// environment (or a file it names), never from the command line or a URL,
// and are never logged; PostgreSQL takes them in its DSN as usual.
//
//	QTOP_CLICKHOUSE_USER           ClickHouse user (default: default)
//	QTOP_CLICKHOUSE_PASSWORD       its password, or
//	QTOP_CLICKHOUSE_PASSWORD_FILE  a file holding it
//	QTOP_CLICKHOUSE_CA_FILE        PEM CAs that sign the server's certificate, with
//	                               ?secure=1 on the store URL (default: the system's roots)
//	QTOP_CLICKHOUSE_CERT_FILE      client certificate, for a server that requires one
//	QTOP_CLICKHOUSE_KEY_FILE       its key
//	QTOP_REDIS_USER                Redis ACL user (default: AUTH with the password only)
//	QTOP_REDIS_PASSWORD            its password (requirepass), or
//	QTOP_REDIS_PASSWORD_FILE       a file holding it
//	QTOP_REDIS_CA_FILE             PEM CAs that sign the server's certificate, with
//	                               a rediss:// address (default: the system's roots)
//	QTOP_REDIS_CERT_FILE           client certificate (tls-auth-clients yes)
//	QTOP_REDIS_KEY_FILE            its key
//
// The engines' CAs are their own variables, apart from QTOP_CA_FILE (the
// CA of qtop's own listeners): a managed ClickHouse or Redis is rarely
// signed by the CA that signs the collectors.
const (
	EnvClickHouseUser         = "QTOP_CLICKHOUSE_USER"
	EnvClickHousePassword     = "QTOP_CLICKHOUSE_PASSWORD"
	EnvClickHousePasswordFile = "QTOP_CLICKHOUSE_PASSWORD_FILE"
	EnvClickHouseCA           = "QTOP_CLICKHOUSE_CA_FILE"
	EnvRedisUser              = "QTOP_REDIS_USER"
	EnvRedisPassword          = "QTOP_REDIS_PASSWORD"
	EnvRedisPasswordFile      = "QTOP_REDIS_PASSWORD_FILE"
	EnvRedisCA                = "QTOP_REDIS_CA_FILE"
)

// EngineAuth is how the collector logs in to an engine: a user, a
// password and the files of its TLS client. Its String and LogValue never
// show the password.
type EngineAuth struct {
	User, Password string
	// TLS names the CA (empty: the system's roots) and an optional client
	// certificate; it applies when the engine's address asks for TLS.
	TLS tlsfiles.ClientFiles
	// env is the variables' prefix, named in errors.
	env string
}

// ClickHouseAuthFromEnv reads the QTOP_CLICKHOUSE_… variables.
func ClickHouseAuthFromEnv() (EngineAuth, error) { return engineAuthFromEnv("QTOP_CLICKHOUSE") }

// RedisAuthFromEnv reads the QTOP_REDIS_… variables.
func RedisAuthFromEnv() (EngineAuth, error) { return engineAuthFromEnv("QTOP_REDIS") }

func engineAuthFromEnv(prefix string) (EngineAuth, error) {
	a := EngineAuth{User: os.Getenv(prefix + "_USER"), Password: os.Getenv(prefix + "_PASSWORD"), env: prefix,
		TLS: tlsfiles.ClientFiles{CA: os.Getenv(prefix + "_CA_FILE"), Cert: os.Getenv(prefix + "_CERT_FILE"), Key: os.Getenv(prefix + "_KEY_FILE")}}
	file := os.Getenv(prefix + "_PASSWORD_FILE")
	if file == "" {
		return a, nil
	}
	if a.Password != "" {
		return EngineAuth{}, fmt.Errorf("%w: %s_PASSWORD and %s_PASSWORD_FILE both set: use one", ErrConfig, prefix, prefix)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return EngineAuth{}, fmt.Errorf("%w: %s_PASSWORD_FILE: %w", ErrConfig, prefix, err)
	}
	// A trailing newline is the editor's, not the password's.
	if a.Password = strings.TrimRight(string(b), "\r\n"); a.Password == "" {
		return EngineAuth{}, fmt.Errorf("%w: %s_PASSWORD_FILE %s is empty", ErrConfig, prefix, file)
	}
	return a, nil
}

// String describes a without its password.
func (a EngineAuth) String() string {
	var parts []string
	if a.User != "" {
		parts = append(parts, "user "+a.User)
	}
	if a.Password != "" {
		parts = append(parts, "with a password")
	}
	if a.TLS.CA != "" {
		parts = append(parts, "CA "+a.TLS.CA)
	}
	if a.TLS.Cert != "" {
		parts = append(parts, "client certificate "+a.TLS.Cert)
	}
	if len(parts) == 0 {
		return "no credentials"
	}
	return strings.Join(parts, ", ")
}

// GoString is String for %#v, so that no verb prints the password.
func (a EngineAuth) GoString() string { return "collector.EngineAuth{" + a.String() + "}" }

// LogValue logs a as String does.
func (a EngineAuth) LogValue() slog.Value { return slog.StringValue(a.String()) }

var (
	_ fmt.Stringer   = EngineAuth{}
	_ fmt.GoStringer = EngineAuth{}
	_ slog.LogValuer = EngineAuth{}
)

// tlsConfig is the engine's client TLS configuration (TLS 1.2+, verifying
// the server for serverName); secure says whether the address asked for
// TLS: files without it are an error rather than a plaintext connection.
func (a EngineAuth) tlsConfig(secure bool, serverName, ask string) (*tls.Config, error) {
	if !secure {
		if !a.TLS.Empty() {
			return nil, fmt.Errorf("%w: %s_CA_FILE, _CERT_FILE or _KEY_FILE is set but %s", ErrConfig, a.env, ask)
		}
		return nil, nil
	}
	c, err := a.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, a.env, err)
	}
	if c == nil {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c.ServerName = serverName
	return c, nil
}

// engineHint adds what to check to a failure to reach an engine: a TLS
// verification or handshake error names the CA variable, a refused login
// the user; a connection closed at once without TLS (secure false) may
// be a server that takes only TLS.
func (a EngineAuth) engineHint(err error, secure bool) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var record tls.RecordHeaderError
	user := a.User
	if user == "" {
		user = "default"
	}
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w (is %s_CA_FILE the CA that signs the server's certificate?)", err, a.env)
	case errors.As(err, &host):
		return fmt.Errorf("%w (the server's certificate is not for the host in the address)", err)
	case errors.As(err, &record):
		return fmt.Errorf("%w (the server does not speak TLS on this port)", err)
	case loginRefused(err):
		return fmt.Errorf("%w (logging in as user %q: check %s_USER and %s_PASSWORD or %s_PASSWORD_FILE)", err, user, a.env, a.env, a.env)
	case !secure && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		ask := "use a rediss:// address"
		if a.env == "QTOP_CLICKHOUSE" {
			ask = "add ?secure=1 to the store URL"
		}
		return fmt.Errorf("%w (the server closed the connection: does it take only TLS? then %s)", err, ask)
	}
	return err
}

// loginRefused says whether err is a server refusing the user or its
// password (Redis, ClickHouse 18.16 to 26): the servers' texts are all
// there is to go on.
func loginRefused(err error) bool {
	msg := err.Error()
	for _, s := range [...]string{"WRONGPASS", "NOAUTH", "NOPERM", "Wrong password", "Unknown user", "code: 516",
		"code: 192", "code: 193", "unauthenticated"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// engineRefused says whether err is an engine refusing what the collector
// was configured with — its login, or a certificate the CA given does not
// sign or that is for another host — rather than an engine that is down:
// waiting will not help.
func engineRefused(err error) bool {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	return errors.As(err, &unknown) || errors.As(err, &host) || loginRefused(err)
}

// RedisTimeout bounds a Redis client's dial, reads and writes: a slow
// Redis costs a fleet-quota exchange, never a report.
const RedisTimeout = time.Second

// NewRedisClient makes the collector's Redis client for target — host:port,
// redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB] (TLS) — logging in
// with auth. It is the one place the collector makes a Redis client. The
// URL may not carry a user or password (they go in auth, from the
// environment), so it is safe to log.
func NewRedisClient(target string, auth EngineAuth) (*redis.Client, error) {
	if auth.env == "" {
		auth.env = "QTOP_REDIS"
	}
	opts, err := redisOptions(target)
	if err != nil {
		return nil, err
	}
	opts.Username, opts.Password = auth.User, auth.Password
	host, _, _ := net.SplitHostPort(opts.Addr)
	if opts.TLSConfig, err = auth.tlsConfig(opts.TLSConfig != nil, host, "the Redis address is not rediss://"); err != nil {
		return nil, err
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.MaxRetries = RedisTimeout, RedisTimeout, RedisTimeout, 1
	return redis.NewClient(opts), nil
}

// redisOptions reads a Redis target without echoing it in errors (a
// mistyped URL may hold a password).
func redisOptions(target string) (*redis.Options, error) {
	if !strings.Contains(target, "://") && strings.Contains(target, "@") {
		return nil, fmt.Errorf("%w: redis address: credentials do not belong in it; set QTOP_REDIS_USER and QTOP_REDIS_PASSWORD (or _PASSWORD_FILE)", ErrConfig)
	}
	if !strings.Contains(target, "://") {
		if _, _, err := net.SplitHostPort(target); err != nil {
			return nil, fmt.Errorf("%w: redis %q: want host:port, redis://host:port or rediss://host:port", ErrConfig, target)
		}
		return &redis.Options{Addr: target}, nil
	}
	u, err := url.Parse(target)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: redis address is not a URL: %v", ErrConfig, err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: redis address: credentials do not belong in the URL; set QTOP_REDIS_USER and QTOP_REDIS_PASSWORD (or _PASSWORD_FILE)", ErrConfig)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("%w: redis address %q: want redis:// or rediss://", ErrConfig, target)
	}
	if u.Query().Has("skip_verify") {
		return nil, fmt.Errorf("%w: redis address %q: the collector always verifies the server; name its CA in %s", ErrConfig, target, EnvRedisCA)
	}
	opts, err := redis.ParseURL(target)
	if err != nil {
		return nil, fmt.Errorf("%w: redis address %q: %w", ErrConfig, target, err)
	}
	return opts, nil
}

// redisDescribe is the client's address as the logs show it: the scheme,
// host:port and database, never a credential.
func redisDescribe(o *redis.Options) string {
	scheme := "redis"
	if o.TLSConfig != nil {
		scheme = "rediss"
	}
	return fmt.Sprintf("%s://%s/%d", scheme, o.Addr, o.DB)
}
