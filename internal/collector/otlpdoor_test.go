package collector

import (
	"errors"
	"strings"
	"testing"
)

// An OTLP/gRPC listener off loopback needs the report token, whatever
// --listen is: the collector refuses to start without it, naming the flag.
func TestOTLPGRPCOffLoopbackNeedsToken(t *testing.T) {
	for _, c := range []struct {
		grpc, token string
		insecure    bool
		ok          bool
	}{
		{"0.0.0.0:0", "", false, false},
		{":0", "", false, false},
		{"127.0.0.1:0", "", false, true},
		{"localhost:0", "", false, true},
		{"0.0.0.0:0", "tok", false, true},
		{"0.0.0.0:0", "", true, true},
	} {
		s, err := New(Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w",
			OTLPGRPC: c.grpc, Token: c.token, Insecure: c.insecure})
		if c.ok != (err == nil) {
			t.Errorf("%+v: %v", c, err)
		}
		if err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--otlp-grpc") || !strings.Contains(err.Error(), "--token")) {
			t.Errorf("%+v: error %q should name --otlp-grpc and --token", c, err)
		}
		if s != nil {
			s.Shutdown(t.Context())
		}
	}
}
