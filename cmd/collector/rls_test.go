package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRLSFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatal(code)
	}
	for _, s := range []string{"--rls-listen", "$QTOP_RLS_LISTEN", "ShouldRateLimit"} {
		if !strings.Contains(out.String()+errb.String(), s) {
			t.Errorf("serve --help does not name %s", s)
		}
	}
	for _, c := range []struct{ addr, want string }{
		{"8081", "rls listen"},
		{"0.0.0.0:0", "--rls-listen 0.0.0.0:0 is not loopback"},
	} {
		out.Reset()
		errb.Reset()
		code := run([]string{"serve", "--store", "none", "--data-dir", t.TempDir(), "--rls-listen", c.addr}, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("--rls-listen %s: exit %d: %s", c.addr, code, errb.String())
		}
	}
}
