package collector

import (
	"cmp"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// TestTLSRefusalsCounted: a plaintext client on each TLS port (HTTP, the
// rate-limit service's gRPC) fails its handshake, and each failure is
// counted by listener, so that an operator sees refused clients (they
// were logged at debug level only).
func TestTLSRefusalsCounted(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.Server(t, "collector")
	reg := prometheus.NewRegistry()
	cfg := Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w", Token: "tok",
		TLSConfig:  TLSConfig{TLS: tlsfiles.ServerFiles{Cert: cert, Key: key}},
		Registerer: reg}
	cfg.RLSListen, cfg.RLS = "127.0.0.1:0", envoyRLS
	s := startServer(t, cfg)
	other := tlstest.NewCA(t, "other")
	// A plaintext client (a gRPC client without TLS), and one that does
	// not trust the collector's CA: the server closes each once its
	// handshake failed, after counting it.
	refused := func(addr string, viaTLS bool, plain ...string) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if viaTLS {
			cfg, err := tlsfiles.ClientFiles{CA: other.File}.Config()
			if err != nil {
				t.Fatal(err)
			}
			cfg.ServerName = "collector"
			if tls.Client(c, cfg).Handshake() == nil {
				t.Fatal("a client trusting another CA finished its handshake")
			}
		} else {
			c.Write([]byte(cmp.Or(strings.Join(plain, ""), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")))
		}
		io.Copy(io.Discard, c)
	}
	refused(s.Addr(), false)
	refused(s.Addr(), true)
	refused(s.RLSAddr(), false)
	// An http:// URL for the https:// port: Go's server answers 400
	// without logging it.
	refused(s.Addr(), false, "GET /v1/live HTTP/1.1\r\nHost: collector\r\n\r\n")
	want := `
# HELP qtop_collector_tls_handshakes_failed_total TLS handshakes a port of the collector refused or that failed (listener: http, otlp, rls): a plaintext client, a client without the CA, or, with --tls-client-ca, one without a valid client certificate.
# TYPE qtop_collector_tls_handshakes_failed_total counter
qtop_collector_tls_handshakes_failed_total{listener="http"} 3
qtop_collector_tls_handshakes_failed_total{listener="rls"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_collector_tls_handshakes_failed_total"); err != nil {
		t.Fatal(err)
	}
}
