package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"serve", "--help"}, {"report", "--help"}, {"help", "report"}} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		text := out.String() + errb.String()
		if code != 0 || !strings.Contains(text, "Example") {
			t.Errorf("%v: exit %d, want 0 and examples:\n%s", args, code, text)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatal(code)
	}
	for _, env := range []string{"QTOP_LISTEN", "QTOP_STORE", "QTOP_CLUSTER", "QTOP_POSTGRES", "QTOP_TOKEN", "QTOP_DEMO", "QTOP_DATA_DIR"} {
		if !strings.Contains(errb.String(), "$"+env) {
			t.Errorf("serve --help does not name %s", env)
		}
	}
}

func TestBadArguments(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"frobnicate"}, nil, "unknown command"},
		{[]string{"serve", "--grace", "soon"}, nil, "--grace"},
		{[]string{"serve", "--log-format", "xml"}, nil, "log format"},
		{[]string{"serve"}, map[string]string{"QTOP_DEMO": "maybe"}, "QTOP_DEMO"},
		{[]string{"report", "--measure", "vibes"}, nil, "measure"},
		{[]string{"report", "--from", "yesterday-ish"}, nil, "time"},
		{[]string{"report", "--format", "xlsx"}, nil, "format"},
		{[]string{"report", "--by", "route"}, nil, "by"},
	}
	for _, c := range cases {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", c.args, code, errb.String(), c.want)
		}
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	t.Setenv("QTOP_LISTEN", "not-an-address")
	t.Setenv("QTOP_STORE", "none")
	t.Setenv("QTOP_DATA_DIR", t.TempDir())
	var out, errb bytes.Buffer
	// The listen address from the environment reaches the server, which
	// refuses it.
	if code := run([]string{"serve"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not-an-address") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
