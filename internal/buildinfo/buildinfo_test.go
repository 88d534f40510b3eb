package buildinfo

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestReadStampedVersion(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.8.7"
	in := Read()
	if in.Version != "v9.8.7" || in.GoVersion != runtime.Version() {
		t.Fatalf("Read() = %+v", in)
	}
	var b bytes.Buffer
	Print(&b, "collector")
	if got := b.String(); !strings.HasPrefix(got, "collector v9.8.7 (") || !strings.HasSuffix(got, ")\n") {
		t.Fatalf("Print: %q", got)
	}
}

func TestReadUnstamped(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = ""
	if in := Read(); in.Version == "" || in.Revision == "" {
		t.Fatalf("Read() = %+v: version and revision are never empty", in)
	}
}

func TestCollector(t *testing.T) {
	c := Collector()
	if n := testutil.CollectAndCount(c, "qtop_build_info"); n != 1 {
		t.Fatalf("%d series, want 1", n)
	}
	if v := testutil.ToFloat64(c); v != 1 {
		t.Fatalf("value %v, want 1", v)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
