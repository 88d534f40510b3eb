package otlpin

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// A client that opens an export and then sends frames that carry no
// message — of a type HTTP/2 ignores, a kilobyte every few milliseconds,
// well above the minimum rate — is cut as one that sends nothing: only
// DATA is a message's progress (h2Scan). Before, every byte counted, and
// such a stream held its memory until the read timeout (30 s; an hour
// here). Over TLS too, where the bytes are counted above the handshake
// (GRPCCredentials).
func TestGRPCFramesWithoutDataAreNoProgress(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "h2c", true: "tls"}[withTLS]
		t.Run(name, func(t *testing.T) {
			r := newTestReceiver(t, &sink{}, &fakeClock{now: t0}, WithMinRate(DefaultMinRate, 0), WithGRPCReadTimeout(time.Hour))
			var opts []grpc.ServerOption
			var clientTLS *tls.Config
			if withTLS {
				ca := tlstest.NewCA(t, "frames")
				certFile, keyFile := ca.Server(t, "127.0.0.1")
				cert, err := tls.LoadX509KeyPair(certFile, keyFile)
				if err != nil {
					t.Fatal(err)
				}
				pem, err := os.ReadFile(ca.File)
				if err != nil {
					t.Fatal(err)
				}
				roots := x509.NewCertPool()
				roots.AppendCertsFromPEM(pem)
				clientTLS = &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2"}}
				opts = append(opts, grpc.Creds(GRPCCredentials(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))))
			}
			addr := serveGRPC(t, r, opts...)

			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if clientTLS != nil {
				conn = tls.Client(conn, clientTLS)
			}
			openExport(t, conn, addr)
			stop := make(chan struct{})
			defer close(stop)
			go sendJunkFrames(conn, stop)
			if got := waitStreamEnd(t, conn, 1); got != "grpc-status 1" {
				t.Errorf("the stream ended with %s, want grpc-status 1 (CANCELLED: cut as slow)", got)
			}
			if got := testutil.ToFloat64(r.met.requests.WithLabelValues("grpc", reqSlow)); got != 1 {
				t.Errorf("slow %v, want 1", got)
			}
		})
	}
}

// openExport writes the client preface, SETTINGS and the HEADERS of an
// export on stream 1, and no DATA.
func openExport(t *testing.T, conn net.Conn, authority string) {
	t.Helper()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: exportHeaders(t, authority), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// exportHeaders is the HPACK block of an export's request headers.
func exportHeaders(t *testing.T, authority string) []byte {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", exportMethod},
		{":authority", authority}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	return block.Bytes()
}

// TestGRPCRapidResetClosed: a client that opens streams and resets them
// at once (HTTP/2 "rapid reset") has its connection closed after 100
// resets, and it is counted; before, a trial's client reset 100,000
// streams in 5.6 s on one connection, costing the collector 2 CPU-seconds,
// and was never cut. An exporter cancelling an export now and then is not
// (TestH2ScanFlood).
func TestGRPCRapidResetClosed(t *testing.T) {
	r := newTestReceiver(t, &sink{}, &fakeClock{now: t0})
	addr := serveGRPC(t, r)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	openExport(t, conn, addr)
	block := exportHeaders(t, addr)
	go func() {
		// Until the server closes the connection (a write then fails).
		fr := http2.NewFramer(conn, nil)
		for id := uint32(1); id < 1<<20; id += 2 {
			if id > 1 && fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	fr := http2.NewFramer(nil, conn)
	for {
		if _, err := fr.ReadFrame(); err != nil {
			break // the server closed the connection
		}
	}
	if got := testutil.ToFloat64(r.met.resetFloods); got != 1 {
		t.Errorf("reset floods counted %v, want 1", got)
	}
}

// sendJunkFrames writes a 1 KiB frame of an unknown type every 5 ms (200
// KiB/s) until stop is closed or the connection fails. The pace only
// shapes the load: what the test asserts does not depend on it.
func sendJunkFrames(conn net.Conn, stop <-chan struct{}) {
	fr := http2.NewFramer(conn, nil)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	junk := bytes.Repeat([]byte{'j'}, 1<<10)
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if fr.WriteRawFrame(0xfe, 0, 0, junk) != nil {
				return
			}
		}
	}
}

// waitStreamEnd reads the server's frames until stream id ends, and says
// how: "grpc-status N" from its trailers, or "RST_STREAM CODE".
func waitStreamEnd(t *testing.T, conn net.Conn, id uint32) string {
	t.Helper()
	fr := http2.NewFramer(nil, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "RST_STREAM " + f.ErrCode.String()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == id && f.StreamEnded() {
				for _, h := range f.RegularFields() {
					if h.Name == "grpc-status" {
						return "grpc-status " + h.Value
					}
				}
				return "trailers without grpc-status"
			}
		}
	}
}
