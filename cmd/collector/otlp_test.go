package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestOTLPFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatal(code)
	}
	for _, s := range []string{"--otlp-grpc", "$QTOP_OTLP_GRPC", "--otlp-tenant-attribute", "$QTOP_OTLP_TENANT_ATTRIBUTE", "/v1/traces"} {
		if !strings.Contains(out.String()+errb.String(), s) {
			t.Errorf("serve --help does not name %s", s)
		}
	}
	out.Reset()
	errb.Reset()
	code := run([]string{"serve", "--store", "none", "--data-dir", t.TempDir(), "--otlp-grpc", "4317"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "otlp grpc") {
		t.Fatalf("bad --otlp-grpc: exit %d: %s", code, errb.String())
	}
}
