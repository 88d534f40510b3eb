package collector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/quota/redisquota"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secureRedis returns a client made by collector.NewRedisClient for the
// secure Redis with auth, closed when the test ends.
func secureRedis(t *testing.T, target string, auth collector.EngineAuth) *redis.Client {
	t.Helper()
	c, err := collector.NewRedisClient(target, auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRedisSecureQuotaRoundTrip: two collectors' fleet-quota syncs,
// through clients made as the collector makes them, over TLS with an ACL
// user (the second also presenting a client certificate): each sees the
// other's sums.
func TestRedisSecureQuotaRoundTrip(t *testing.T) {
	sec := testsvc.RedisSecure(t)
	auths := []collector.EngineAuth{
		{User: sec.User, Password: sec.Password, TLS: tlsfiles.ClientFiles{CA: sec.CA}},
		{User: sec.User, Password: sec.Password, TLS: tlsfiles.ClientFiles{CA: sec.CA, Cert: sec.ClientCert, Key: sec.ClientKey}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := fmt.Sprintf("{qtop-quota-tls-%d}:", rand.Uint64())
	var syncs []*redisquota.Sync
	for i, auth := range auths {
		s, err := redisquota.New(secureRedis(t, "rediss://"+sec.Addr, auth), fmt.Sprint("c", i), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		syncs = append(syncs, s.WithPrefix(prefix))
		defer s.WithPrefix(prefix).Leave(context.Background())
	}
	if _, err := syncs[0].Exchange(ctx, map[string]quota.Rates{"bigco": {Demand: 300, Admitted: 200}}); err != nil {
		t.Fatal(err)
	}
	remote, err := syncs[1].Exchange(ctx, map[string]quota.Rates{"bigco": {Demand: 100, Admitted: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if len(remote) != 1 || remote[0].Rates["bigco"] != (quota.Rates{Demand: 300, Admitted: 200}) {
		t.Fatalf("c1 sees %+v, want c0's bigco at 300 demanded, 200 admitted", remote)
	}
}

// TestRedisSecureCollector: a collector given a rediss:// --quota-redis
// and the user, password file and CA in its environment exchanges its
// quota sums without an error, and its log names the user, not the
// password.
func TestRedisSecureCollector(t *testing.T) {
	sec := testsvc.RedisSecure(t)
	logs := &logBuffer{}
	if err := redisFailure(t, "rediss://"+sec.Addr, collector.EngineAuth{User: sec.User, Password: sec.Password, TLS: tlsfiles.ClientFiles{CA: sec.CA}}, logs); err != nil {
		t.Fatalf("exchange failed: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "user "+sec.User) || strings.Contains(out, sec.Password) {
		t.Fatalf("the log should name user %s and never show the password:\n%s", sec.User, out)
	}
}

// TestRedisSecureRefusals: a wrong password, no password, plaintext to
// the TLS port and a CA that did not sign the server's certificate each
// fail with an error that says what to check, never the password.
func TestRedisSecureRefusals(t *testing.T) {
	sec := testsvc.RedisSecure(t)
	otherCA := tlstest.NewCA(t, "other")
	const wrong = "not-the-password-4711"
	cases := []struct {
		name, target string
		auth         collector.EngineAuth
		want         []string
	}{
		{"wrong password", "rediss://" + sec.Addr, collector.EngineAuth{User: sec.User, Password: wrong, TLS: tlsfiles.ClientFiles{CA: sec.CA}},
			[]string{"WRONGPASS", `as user "` + sec.User + `"`, "QTOP_REDIS_PASSWORD"}},
		{"no password", "rediss://" + sec.Addr, collector.EngineAuth{TLS: tlsfiles.ClientFiles{CA: sec.CA}},
			[]string{`as user "default"`, "QTOP_REDIS_PASSWORD"}},
		{"wrong CA", "rediss://" + sec.Addr, collector.EngineAuth{User: sec.User, Password: sec.Password, TLS: tlsfiles.ClientFiles{CA: otherCA.File}},
			[]string{"x509", "QTOP_REDIS_CA_FILE"}},
		{"no TLS", sec.Addr, collector.EngineAuth{User: sec.User, Password: sec.Password}, []string{"only TLS"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logs := &logBuffer{}
			err := redisFailure(t, c.target, c.auth, logs)
			if err == nil {
				t.Fatal("Redis answered; want a refusal")
			}
			t.Logf("refused: %v", err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, secret := range []string{wrong, sec.Password} {
				if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
					t.Fatalf("a password shows in the error or the log: %v", err)
				}
			}
		})
	}
}

// redisFailure runs a collector whose fleet quotas go through target
// with auth (from the environment, as in production) until its first
// exchange, and returns the error it logged (nil when it succeeded). The
// password goes in a file named by QTOP_REDIS_PASSWORD_FILE.
func redisFailure(t *testing.T, target string, auth collector.EngineAuth, logs *logBuffer) error {
	t.Helper()
	clearEngineEnv(t)
	t.Setenv(collector.EnvRedisUser, auth.User)
	if auth.Password != "" {
		t.Setenv(collector.EnvRedisPasswordFile, passwordFile(t, auth.Password))
	}
	t.Setenv(collector.EnvRedisCA, auth.TLS.CA)
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(logs, nil))
	s, err := collector.New(collector.Config{Store: collector.StoreNone, Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: log, Registerer: reg,
		QuotaConfig: collector.QuotaConfig{QuotaRedis: target, QuotaSync: 10 * time.Millisecond, QuotaPrefix: fmt.Sprintf("{qtop-quota-tls-%d}:", rand.Uint64())}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.Run(ctx)
	count := func(name string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	// An exchange that only timed out (a loaded machine's slow handshake)
	// says nothing of the refusal: wait for one that answered or failed
	// otherwise.
	var refusal string
	testsvc.Eventually(t, 30*time.Second, "a quota exchange that did not time out", func() bool {
		if count("qtop_collector_quota_syncs_total") == 0 {
			return false
		}
		out := logs.String()
		if count("qtop_collector_quota_sync_errors_total") == 0 || strings.Contains(out, "exchanged through Redis again") {
			return true // answered
		}
		for _, e := range loggedErrors(out) {
			if !strings.Contains(e, context.DeadlineExceeded.Error()) {
				refusal = e
				return true
			}
		}
		return false
	})
	cancel()
	s.Shutdown(context.Background())
	if refusal == "" {
		return nil
	}
	return errors.New(refusal)
}

// loggedErrors are the err= values of the log lines in out, in order.
func loggedErrors(out string) []string {
	var errs []string
	for line := range strings.Lines(out) {
		i := strings.Index(line, "err=")
		if i < 0 {
			continue
		}
		v := strings.TrimSuffix(line[i+len("err="):], "\n")
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		errs = append(errs, v)
	}
	return errs
}

// TestNewRedisClientAddresses: host:port, redis:// and rediss:// are
// taken; credentials in the URL (never echoed), skip_verify, another
// scheme and CA files without rediss:// are refused.
func TestNewRedisClientAddresses(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	for _, c := range []struct {
		target string
		auth   collector.EngineAuth
		tls    bool
	}{
		{"127.0.0.1:6390", collector.EngineAuth{}, false},
		{"redis://127.0.0.1:6390/2", collector.EngineAuth{User: "u", Password: "p"}, false},
		{"rediss://127.0.0.1:6391", collector.EngineAuth{TLS: tlsfiles.ClientFiles{CA: ca.File}}, true},
	} {
		cl, err := collector.NewRedisClient(c.target, c.auth)
		if err != nil {
			t.Errorf("%s: %v", c.target, err)
			continue
		}
		if o := cl.Options(); (o.TLSConfig != nil) != c.tls || o.Username != c.auth.User || o.Password != c.auth.Password {
			t.Errorf("%s: TLS %v user %q; want TLS %v user %q", c.target, o.TLSConfig != nil, o.Username, c.tls, c.auth.User)
		}
		cl.Close()
	}
	for _, c := range []struct {
		target string
		auth   collector.EngineAuth
		want   string
	}{
		{"rediss://qtop:hunter2@127.0.0.1:6391", collector.EngineAuth{}, "credentials do not belong in the URL"},
		{"redis://:hunter2@127.0.0.1:6390", collector.EngineAuth{}, "credentials do not belong in the URL"},
		{"qtop:hunter2@127.0.0.1:6390", collector.EngineAuth{}, "credentials do not belong"},
		{"rediss://127.0.0.1:6391?skip_verify=true", collector.EngineAuth{}, "always verifies"},
		{"http://127.0.0.1:6390", collector.EngineAuth{}, "want redis:// or rediss://"},
		{"localhost", collector.EngineAuth{}, "want host:port"},
		{"redis://127.0.0.1:6390", collector.EngineAuth{TLS: tlsfiles.ClientFiles{CA: ca.File}}, "not rediss://"},
	} {
		_, err := collector.NewRedisClient(c.target, c.auth)
		if !errors.Is(err, collector.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrConfig saying %q", c.target, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", c.target, err)
		}
	}
}
