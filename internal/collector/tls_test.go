package collector

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// TestTLSListeners runs a real collector serving TLS with mTLS on the HTTP
// API and OTLP/gRPC: a reporter, qtop's API client and a gRPC exporter
// holding the CA and a client certificate reach it; without the client
// certificate, or trusting another CA, they are refused.
func TestTLSListeners(t *testing.T) {
	ca, other := tlstest.NewCA(t, "ca"), tlstest.NewCA(t, "other")
	cert, key := ca.Server(t, "collector")
	ccert, ckey := ca.Client(t, "billing")
	s, err := New(Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w", Token: "tok",
		TLSConfig:  TLSConfig{TLS: tlsfiles.ServerFiles{Cert: cert, Key: key, ClientCA: ca.File}},
		OTLPConfig: OTLPConfig{OTLPGRPC: "127.0.0.1:0"}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	base := "https://" + s.Addr()
	good := tlsfiles.ClientFiles{CA: ca.File, Cert: ccert, Key: ckey}
	for _, c := range []struct {
		name  string
		files tlsfiles.ClientFiles
		ok    bool
	}{
		{"CA and client certificate", good, true},
		{"no client certificate", tlsfiles.ClientFiles{CA: ca.File}, false},
		{"another CA", tlsfiles.ClientFiles{CA: other.File, Cert: ccert, Key: ckey}, false},
	} {
		if err := sendReport(t, base, c.files); (err == nil) != c.ok {
			t.Errorf("reporter, %s: %v", c.name, err)
		}
		if err := getLive(t, base, c.files); (err == nil) != c.ok {
			t.Errorf("api client, %s: %v", c.name, err)
		}
		if err := exportGRPC(t, s.OTLPGRPCAddr(), c.files); (err == nil) != c.ok {
			t.Errorf("otlp grpc, %s: %v", c.name, err)
		}
	}
}

// sendReport sends one report; a refused handshake shows as a failed
// attempt for the network (the reporter keeps retrying: it is then
// stopped).
func sendReport(t *testing.T, base string, files tlsfiles.ClientFiles) error {
	t.Helper()
	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "billing", Instance: "i1", Host: "h"}))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rep, err := meter.NewReporter(base+api.PathReports, rec, meter.WithToken("tok"), meter.WithTLSFiles(files),
		meter.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /bills"}, Kind: report.KindRequest, RU: 2, Duration: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	go rep.ForceFlush(ctx)
	var sent, failed float64
	waitFor(t, 10*time.Second, "the report sent or refused", func() bool {
		sent, failed = counter(t, reg, "qtop_ingest_reports_sent_total"), counter(t, reg, "qtop_ingest_report_attempts_failed_total")
		return sent+failed > 0
	})
	cancel()
	rep.Shutdown(ctx) // done: what is queued is dropped, not retried

	if sent == 0 {
		return fmt.Errorf("%v failed attempts", failed)
	}
	return nil
}

// counter sums the series of the counter name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func getLive(t *testing.T, base string, files tlsfiles.ClientFiles) error {
	t.Helper()
	tr, err := files.Transport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	cl, err := api.NewClient(base, api.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.Get(t.Context())
	return err
}

func exportGRPC(t *testing.T, addr string, files tlsfiles.ClientFiles) error {
	t.Helper()
	conf, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer tok")
	_, err = coltracepb.NewTraceServiceClient(cc).Export(ctx, otlpRequest("shop", 3, 1, t0, 1))
	return err
}

// TestPeersOverTLS: a collector reaches a peer serving mTLS with the CA
// and a client certificate (--peer-ca-file, --peer-cert-file); with the
// CA alone the peer refuses it and is shown down.
func TestPeersOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.Server(t, "peer")
	ccert, ckey := ca.Client(t, "collector")
	peer, err := New(Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "p",
		TLSConfig: TLSConfig{TLS: tlsfiles.ServerFiles{Cert: cert, Key: key, ClientCA: ca.File}}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := peer.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer peer.Shutdown(context.Background())
	for _, c := range []struct {
		name  string
		files tlsfiles.ClientFiles
		ok    bool
	}{
		{"CA and client certificate", tlsfiles.ClientFiles{CA: ca.File, Cert: ccert, Key: ckey}, true},
		{"CA alone", tlsfiles.ClientFiles{CA: ca.File}, false},
		{"system roots", tlsfiles.ClientFiles{}, false},
	} {
		s, err := New(Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "s",
			FleetConfig: FleetConfig{Peers: []string{"https://" + peer.Addr()}},
			TLSConfig:   TLSConfig{PeerTLS: c.files}, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		cl, err := api.NewClient("http://" + s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		snap, err := cl.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Peers) != 2 || snap.Peers[1].OK != c.ok {
			t.Errorf("%s: peers %+v", c.name, snap.Peers)
		}
		s.Shutdown(context.Background())
	}
}
