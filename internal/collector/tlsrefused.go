package collector

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
)

// tlsRefusalLogEvery is how often a port logs its failed TLS handshakes:
// a scanner makes one a second, and after mTLS is turned on every client
// without a certificate makes them, which an operator must see without
// the log filling.
const tlsRefusalLogEvery = time.Minute

// tlsRefusals counts a port's failed TLS handshakes
// (qtop_collector_tls_handshakes_failed_total) and logs them at warn, the
// first at once, then at most once every tlsRefusalLogEvery with how many
// failed since and the last reason. Before, they were logged at debug
// level only: after turning mTLS on, nothing said clients were refused.
type tlsRefusals struct {
	name    string
	counter prometheus.Counter
	log     *slog.Logger

	mu     sync.Mutex
	logged time.Time
	since  int
}

func newTLSRefusals(label, name string, m *connMetrics, log *slog.Logger) *tlsRefusals {
	return &tlsRefusals{name: name, counter: m.tls.WithLabelValues(label), log: log}
}

// failed counts one failed handshake, for the reason why.
func (t *tlsRefusals) failed(why string) {
	t.counter.Inc()
	t.mu.Lock()
	t.since++
	n, now := t.since, time.Now()
	if !t.logged.IsZero() && now.Sub(t.logged) < tlsRefusalLogEvery {
		t.mu.Unlock()
		return
	}
	t.logged, t.since = now, 0
	t.mu.Unlock()
	t.log.Warn(t.name+": TLS handshakes failed (a plaintext client, one without the CA, or without a valid client certificate; logged at most once a minute)",
		"failed", n, "last", why)
}

// refusedCreds counts the server handshakes of a gRPC port that fail.
type refusedCreds struct {
	credentials.TransportCredentials
	t *tlsRefusals
}

func (c refusedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.t.failed(raw.RemoteAddr().String() + ": " + err.Error())
	}
	return conn, info, err
}

func (c refusedCreds) Clone() credentials.TransportCredentials {
	return refusedCreds{c.TransportCredentials.Clone(), c.t}
}
