package chstore

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/tlsfiles"
)

// TestOpenTLS: WithTLS with the CA of the server's certificate and
// WithAuth with a user that needs a password open the store on the
// native protocol's secure port; without the CA the handshake fails.
func TestOpenTLS(t *testing.T) {
	sec := testsvc.ClickHouseSecure(t)
	pool, err := tlsfiles.LoadPool(sec.CA)
	if err != nil {
		t.Fatal(err)
	}
	db := testDB(t, testsvc.ClickHouse(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, sec.Addr, db, WithAuth(sec.User, sec.Password), WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The system's roots do not know the test CA.
	_, err = Open(ctx, sec.Addr, db, WithAuth(sec.User, sec.Password), WithTLS(nil))
	if err == nil || !strings.Contains(err.Error(), "x509") {
		t.Fatalf("with the system's roots: %v, want a certificate verification error", err)
	}
}
