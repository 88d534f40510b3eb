package report

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// docReport is the report of the worked example in doc.go.
func docReport() *Report {
	r := &Report{
		Source: Source{Service: "api", Instance: "i1", Host: "h1"},
		Seq:    7,
		Start:  time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC),
		End:    time.Date(2026, 11, 29, 9, 0, 1, 0, time.UTC),
		Rows: []Row{{Tenant: "acme", Route: "GET /a", Tier: tenant.T2, Kind: KindRequest,
			Count: 2, Duration: 30 * time.Millisecond, RU: 1.5, Bytes: 100}},
	}
	r.Rows[0].Latency.Observe(0.010)
	r.Rows[0].Latency.Observe(0.020)
	r.Enforcement.PriceMultiplier = [4]float64{1, 1, 1, 1}
	return r
}

// TestFormatGolden pins the version 2 encoding: the bytes of the worked
// example of doc.go, uncompressed, are in testdata/report-v2.hex. A change
// to them is a change of format, which needs a new version.
func TestFormatGolden(t *testing.T) {
	b, err := docReport().marshalUncompressed()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "report-v2.hex")
	if *update {
		if err := os.WriteFile(path, []byte(hex.Dump(b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readHexDump(t, path)
	if !bytes.Equal(b, want) {
		t.Errorf("encoding changed:\n%s\nwant:\n%s", hex.Dump(b), hex.Dump(want))
	}
	// And the golden bytes decode to the report.
	got, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, docReport(), got)
}

// TestFormatGoldenV1: a version 1 body (a process not yet upgraded) still
// decodes to the same report.
func TestFormatGoldenV1(t *testing.T) {
	got, err := Decode(readHexDump(t, filepath.Join("testdata", "report-v1.hex")))
	if err != nil {
		t.Fatal(err)
	}
	want := docReport()
	want.Version = 1
	sameReport(t, want, got)
	if got.Version != 1 {
		t.Errorf("version %d, want 1", got.Version)
	}
}

// readHexDump reads the bytes of a hex.Dump file.
func readHexDump(t *testing.T, path string) []byte {
	t.Helper()
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, line := range strings.Split(strings.TrimSpace(string(golden)), "\n") {
		// hex.Dump lines: offset, 16 bytes in two groups, |text|.
		f := strings.Fields(strings.SplitN(line, "|", 2)[0])
		for _, h := range f[1:] {
			x, err := hex.DecodeString(h)
			if err != nil {
				t.Fatalf("golden line %q: %v", line, err)
			}
			want = append(want, x...)
		}
	}
	return want
}
