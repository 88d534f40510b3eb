package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/ru"
)

func csvFor(m ru.Model) string {
	var b strings.Builder
	b.WriteString("op,bytes,latency,cost\n")
	for i := 0; i < 200; i++ {
		op := ru.Op(i % ru.NumOps)
		by := int64((i * 7919) % 65536)
		ms := float64((i*104729)%5000) / 100
		fmt.Fprintf(&b, "%s,%d,%gms,%g\n", op, by, ms, m.Cost(op, by, 0)+ms*m.PerMs)
	}
	return b.String()
}

func TestRunText(t *testing.T) {
	truth := ru.Model{Base: [ru.NumOps]float64{1, 6, 4, 2}, PerKiB: 0.25, PerMs: 0.5}
	var out, errOut bytes.Buffer
	if code := run(nil, strings.NewReader(csvFor(truth)), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"samples 200", "base write", "6.0000", "per_kib", "0.250000", "R² 1.0000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunJSONFromFile(t *testing.T) {
	truth := ru.Model{Base: [ru.NumOps]float64{2, 12, 8, 4}, PerKiB: 0.5, PerMs: 1}
	p := filepath.Join(t.TempDir(), "load.csv")
	if err := os.WriteFile(p, []byte(csvFor(truth)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-json", "-scale", "2", p}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var m ru.Model
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.Base[ru.OpWrite]-6) > 1e-6 || math.Abs(m.PerKiB-0.25) > 1e-9 {
		t.Errorf("scaled model %+v", m)
	}
}

func TestRunErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, strings.NewReader("op,bytes,latency,cost\nread,x,1,1\n"), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "line 2") {
		t.Errorf("bad csv: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"-scale", "0"}, nil, &out, &errOut); code != 2 {
		t.Errorf("bad scale: exit %d", code)
	}
	if code := run([]string{"/nonexistent/file.csv"}, nil, &out, &errOut); code != 1 {
		t.Errorf("missing file: exit %d", code)
	}
	errOut.Reset()
	if code := run(nil, strings.NewReader("op,bytes,latency,cost\nread,1,1,1\n"), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "cannot be fitted") {
		t.Errorf("one sample: exit %d, %q", code, errOut.String())
	}
}

// TestHelp: --help, of rucalib and of pgload, is an answer (exit 0, on
// standard output) with examples, as every other qtop command's is.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"pgload", "--help"}} {
		var out, errOut bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errOut)
		if code != 0 || errOut.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
		for _, want := range []string{"Examples:", "rucalib pgload -dsn", "-json", "-n"} {
			if args[0] == "pgload" && want == "-json" || args[0] != "pgload" && want == "-n" {
				continue
			}
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, out.String())
			}
		}
	}
}
