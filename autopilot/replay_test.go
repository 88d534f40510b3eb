package autopilot

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// recording reads the snapshots of a qtop --record file.
func recording(t *testing.T, path string) []*api.Snapshot {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, api.MaxEventBytes)
	var out []*api.Snapshot
	for sc.Scan() {
		var l struct {
			Snapshot *api.Snapshot `json:"snapshot"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Snapshot != nil {
			out = append(out, l.Snapshot)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplayDemo: the demo's Monday-9am import, recorded by qtop, makes
// the default rules (shadow) apply a quota to the importer, bigcorp, at
// the first second the recording has enough history to judge it by (the
// recent 10 s and 5 s before them) — 16 s into the recording, 7 s after
// its import began — and nothing else.
func TestReplayDemo(t *testing.T) {
	snaps := recording(t, "../testdata/incident/demo.qtop.gz")
	e := newEngine(t, Default())
	var ds []Decision
	for _, s := range snaps {
		ds = append(ds, e.Step(s)...)
	}
	if len(ds) != 1 {
		t.Fatalf("%d decisions: %v", len(ds), ds)
	}
	d := ds[0]
	if d.Kind != KindApply || d.Tenant != "bigcorp" || !d.Shadow || !d.Time.Equal(snaps[0].Time.Add(16*time.Second)) ||
		d.PolicyRule == nil || !d.PolicyRule.Shadow || d.Evidence.VictimsHurt < 3 || d.Evidence.Share < 0.3 {
		t.Fatalf("%v", d)
	}
	if err := d.PolicyRule.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Log(d)
}
