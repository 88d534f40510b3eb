package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/autopilot"
)

// TestAutopilotReplayDemo: replaying the demo's recorded import prints
// one decision, a shadow quota on the importer, with its evidence; as
// JSON too.
func TestAutopilotReplayDemo(t *testing.T) {
	const demo = "../../testdata/incident/demo.qtop.gz"
	var out, errb bytes.Buffer
	if code := run([]string{"autopilot", "--replay", demo}, &out, &errb); code != 0 {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "would apply quota rule=noisy-neighbour tenant=bigcorp") ||
		!strings.Contains(lines[0], "victims 37") || !strings.Contains(errb.String(), "46 snapshots, 1 decisions") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"autopilot", "--replay", demo, "--format", "json"}, &out, &errb); code != 0 {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	var d autopilot.Decision
	if err := json.Unmarshal(out.Bytes(), &d); err != nil || d.Tenant != "bigcorp" || d.Kind != autopilot.KindApply || d.PolicyRule == nil {
		t.Fatalf("%v: %s", err, out.String())
	}
}

// TestAutopilotReplayPolicy: --policy takes a whole policy or its
// autopilot part; a rule that only acts on DB load at 90% decides
// nothing; bad rules are refused with the reason.
func TestAutopilotReplayPolicy(t *testing.T) {
	const demo = "../../testdata/incident/demo.qtop.gz"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, body, want string
		code             int
	}{
		{"whole.json", `{"version":3,"autopilot":{"rules":[{"name":"db","victims_min":3,"resource":"db","min_share":0.9,"action":"budget"}]}}`, "0 decisions", 0},
		{"part.json", `{"rules":[{"name":"ru","victims_min":3,"mode":"enforce","action":"throttle"}]}`, "1 decisions", 0},
		{"bad.json", `{"rules":[{"name":"x","victims_min":3,"for_seconds":1e9}]}`, "for_seconds", 2},
		{"unknown.json", `{"rules":[{"name":"x","victim_min":3}]}`, "victim_min", 2},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"autopilot", "--replay", demo, "--policy", write(c.name, c.body)}, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: code %d\nstdout:\n%s\nstderr:\n%s", c.name, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"autopilot"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--replay FILE is required") {
		t.Fatalf("code %d: %s", code, errb.String())
	}
}

// TestAutopilotReplayCutShort: a recording qtop is still writing (its
// gzip stream not closed, its last line cut) is replayed up to its last
// whole snapshot, and says so, as qtop replay does; a bad line with more
// after it is still an error.
func TestAutopilotReplayCutShort(t *testing.T) {
	const demo = "../../testdata/incident/demo.qtop.gz"
	whole, err := os.ReadFile(demo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.qtop.gz")
	if err := os.WriteFile(cut, whole[:len(whole)*3/4], 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"autopilot", "--replay", cut}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "stops mid-write") {
		t.Fatalf("a cut gzip: code %d: %s", code, errb.String())
	}
	plain := filepath.Join(dir, "bad.qtop")
	if err := os.WriteFile(plain, []byte("{\"qtop_recording\":1}\n{\"snapshot\":\n{\"snapshot\":{}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run([]string{"autopilot", "--replay", plain}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "snapshot 1") {
		t.Fatalf("a bad line before others: code %d: %s", code, errb.String())
	}
}
