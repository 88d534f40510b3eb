package collector_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// clearEngineEnv unsets every engine variable for the test, so that the
// machine's own settings do not leak in.
func clearEngineEnv(t *testing.T) {
	for _, p := range []string{"QTOP_CLICKHOUSE", "QTOP_REDIS"} {
		for _, s := range []string{"_USER", "_PASSWORD", "_PASSWORD_FILE", "_CA_FILE", "_CERT_FILE", "_KEY_FILE"} {
			t.Setenv(p+s, "")
			os.Unsetenv(p + s)
		}
	}
}

// passwordFile writes password (with the newline an editor adds) to a
// file of its own and returns its path.
func passwordFile(t *testing.T, password string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(f, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// secureDB returns a database name of the test's own on the secure
// ClickHouse, dropped when the test ends.
func secureDB(t *testing.T, sec testsvc.Secure) string {
	t.Helper()
	db := fmt.Sprintf("qtopsec_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	pool, err := tlsfiles.LoadPool(sec.CA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{sec.Addr},
			Auth: clickhouse.Auth{Username: sec.User, Password: sec.Password},
			TLS:  &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
		if err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
			conn.Close()
		}
	})
	return db
}

// TestClickHouseSecureStore: with the user, the password from a file and
// the CA of the server's certificate, the store opens over TLS, writes a
// rollup and reads it back; the logs never show the password.
func TestClickHouseSecureStore(t *testing.T) {
	sec := testsvc.ClickHouseSecure(t)
	clearEngineEnv(t)
	t.Setenv(collector.EnvClickHouseUser, sec.User)
	t.Setenv(collector.EnvClickHousePasswordFile, passwordFile(t, sec.Password))
	t.Setenv(collector.EnvClickHouseCA, sec.CA)
	db := secureDB(t, sec)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := collector.OpenStore(ctx, "clickhouse://"+sec.Addr+"/"+db+"?secure=1", collector.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	minute := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	row := store.Rollup{Minute: minute, Writer: "w1", Version: 1, Service: "api", Tenant: "acme", Route: "/x", Kind: "request", Count: 7, RU: 42}
	if err := st.WriteRollups(ctx, []store.Rollup{row}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Usage(ctx, minute, minute.Add(time.Minute), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Tenant != "acme" || got[0].Requests != 7 || got[0].RU != 42 {
		t.Fatalf("read back %+v, want acme with 7 requests and 42 RU", got)
	}
	if !strings.Contains(logs.String(), "user "+sec.User) {
		t.Errorf("the debug log does not say which user logs in:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), sec.Password) {
		t.Fatalf("the log shows the password:\n%s", logs.String())
	}
}

// TestClickHouseSecureRefusals: a wrong password, a CA that did not sign
// the server's certificate, plaintext to the TLS port, TLS to the plain
// port and a CA without ?secure=1 each fail with an error that says what
// to check, naming the user and never the password.
func TestClickHouseSecureRefusals(t *testing.T) {
	sec := testsvc.ClickHouseSecure(t)
	plain := testsvc.ClickHouse(t)
	otherCA := tlstest.NewCA(t, "other")
	const wrong = "not-the-password-4711"
	cases := []struct {
		name, url, password, ca string
		want                    []string
	}{
		{"wrong password", "clickhouse://" + sec.Addr + "/qtop?secure=1", wrong, sec.CA,
			[]string{`as user "` + sec.User + `"`, "QTOP_CLICKHOUSE_PASSWORD"}},
		{"wrong CA", "clickhouse://" + sec.Addr + "/qtop?secure=1", sec.Password, otherCA.File,
			[]string{"x509", "QTOP_CLICKHOUSE_CA_FILE"}},
		{"TLS to the plain port", "clickhouse://" + plain + "/qtop?secure=1", sec.Password, sec.CA,
			[]string{"does not speak TLS"}},
		{"plaintext to the TLS port", "clickhouse://" + sec.Addr + "/qtop", sec.Password, "",
			[]string{"only TLS"}},
		{"CA without secure=1", "clickhouse://" + sec.Addr + "/qtop", sec.Password, sec.CA,
			[]string{"QTOP_CLICKHOUSE_CA_FILE", "?secure=1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEngineEnv(t)
			t.Setenv(collector.EnvClickHouseUser, sec.User)
			t.Setenv(collector.EnvClickHousePassword, c.password)
			t.Setenv(collector.EnvClickHouseCA, c.ca)
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := collector.OpenStore(ctx, c.url, collector.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err == nil {
				st.Close()
				t.Fatal("opened; want a refusal")
			}
			t.Logf("refused: %v", err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, secret := range []string{wrong, sec.Password} {
				if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
					t.Fatalf("a password shows in the error or the log: %v\n%s", err, logs.String())
				}
			}
		})
	}
}

// TestServerRefusesStoreLogin: a collector whose store refuses its
// password, or whose CA does not sign the store's certificate, does not
// start (an unreachable store it would wait for, its minutes in the
// spool, while looking healthy).
func TestServerRefusesStoreLogin(t *testing.T) {
	sec := testsvc.ClickHouseSecure(t)
	otherCA := tlstest.NewCA(t, "other")
	for _, c := range []struct{ name, password, ca, want string }{
		{"wrong password", "not-the-password-4711", sec.CA, "QTOP_CLICKHOUSE_PASSWORD"},
		{"wrong CA", sec.Password, otherCA.File, "QTOP_CLICKHOUSE_CA_FILE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearEngineEnv(t)
			t.Setenv(collector.EnvClickHouseUser, sec.User)
			t.Setenv(collector.EnvClickHousePassword, c.password)
			t.Setenv(collector.EnvClickHouseCA, c.ca)
			s, err := collector.New(collector.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Registerer: prometheus.NewRegistry(),
				Store: "clickhouse://" + sec.Addr + "/qtop?secure=1"})
			if err == nil {
				s.Shutdown(context.Background())
				t.Fatal("started; want a refusal")
			}
			if !errors.Is(err, collector.ErrConfig) || !strings.Contains(err.Error(), "refused the collector") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v", err)
			}
		})
	}
}

// TestServerRefusesUnknownCluster: a --cluster the store does not know
// (misspelt) stops the start, as collector report refuses it, instead of
// acknowledging reports into the spool for good.
func TestServerRefusesUnknownCluster(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	clearEngineEnv(t)
	s, err := collector.New(collector.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Registerer: prometheus.NewRegistry(),
		Store: "clickhouse://" + addr + "/qtop_unknown_cluster", FleetConfig: collector.FleetConfig{Cluster: "qotp"}})
	if err == nil {
		s.Shutdown(context.Background())
		t.Fatal("started; want a refusal")
	}
	if !strings.Contains(err.Error(), `cluster "qotp"`) {
		t.Errorf("error %v", err)
	}
}

// TestEngineAuthFromEnv: a password file's trailing newline is dropped;
// a password both set and in a file, an empty file or a missing one are
// refused; String never shows the password.
func TestEngineAuthFromEnv(t *testing.T) {
	clearEngineEnv(t)
	t.Setenv(collector.EnvRedisUser, "qtop")
	t.Setenv(collector.EnvRedisPasswordFile, passwordFile(t, "s3cret pass"))
	a, err := collector.RedisAuthFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if a.User != "qtop" || a.Password != "s3cret pass" {
		t.Fatalf("got user %q password %q", a.User, a.Password)
	}
	if s := a.String() + fmt.Sprint(a) + fmt.Sprintf("%v %+v %#v", a, a, a); strings.Contains(s, "s3cret") {
		t.Fatalf("the description shows the password: %s", s)
	}
	t.Setenv(collector.EnvRedisPassword, "also")
	if _, err := collector.RedisAuthFromEnv(); !errors.Is(err, collector.ErrConfig) || !strings.Contains(err.Error(), "use one") {
		t.Errorf("password and password file: %v, want ErrConfig saying to use one", err)
	}
	t.Setenv(collector.EnvRedisPassword, "")
	t.Setenv(collector.EnvClickHousePasswordFile, passwordFile(t, ""))
	if _, err := collector.ClickHouseAuthFromEnv(); !errors.Is(err, collector.ErrConfig) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty password file: %v, want ErrConfig saying it is empty", err)
	}
	t.Setenv(collector.EnvClickHousePasswordFile, filepath.Join(t.TempDir(), "missing"))
	if _, err := collector.ClickHouseAuthFromEnv(); !errors.Is(err, collector.ErrConfig) {
		t.Errorf("missing password file: %v, want ErrConfig", err)
	}
}
