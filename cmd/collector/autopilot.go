package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
)

const autopilotUsage = `Usage: collector autopilot --replay FILE [flags]

Runs the autopilot's rules over a recorded incident (a qtop --record file,
JSON lines, gzip when it ends in .gz) and prints every decision they make —
apply, relax, tighten, lift — one per line with its evidence: the victims'
p95 against their baselines, the services' latency ratio, the offender's
share and factor, the baselines frozen when the action began. Nothing is
applied: this is how a rule earns trust before it is switched to enforce.

--policy reads the rules from a JSON file: a whole policy (its "autopilot"
part is used) or an autopilot part alone ({"allow":[…],"rules":[…]}).
Without it the default rule set runs (shadow): 3 tenants' p95 at 2× their
baseline or a latency ratio under 0.7, and one tenant driving ≥30% of the
RU at ≥3× its own baseline → a fleet quota at its baseline for ≤15 min.

Examples:
  collector autopilot --replay testdata/incident/demo.qtop.gz
  collector autopilot --replay monday.qtop.gz --policy autopilot.json --format json

Flags:
`

func autopilotCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("autopilot", autopilotUsage, stderr)
	replay := fs.String("replay", "", "the recording to replay (qtop --record FILE)")
	polFile := fs.String("policy", "", "JSON file with the rules (a policy, or its autopilot part); default: the default rule set")
	format := fs.String("format", "text", "text (one decision a line) or json (one JSON object a line)")
	if code, done := parse(fs, args, stderr); done {
		return code
	}
	switch {
	case *replay == "":
		fmt.Fprintln(stderr, "collector autopilot: --replay FILE is required (a qtop --record file)")
		return 2
	case *format != "text" && *format != "json":
		fmt.Fprintf(stderr, "collector autopilot: --format %q: want text or json\n", *format)
		return 2
	}
	rules := autopilot.Default()
	if *polFile != "" {
		var err error
		if rules, err = readAutopilot(*polFile); err != nil {
			fmt.Fprintln(stderr, "collector autopilot:", err)
			return 2
		}
	}
	e, err := autopilot.New(rules)
	if err != nil {
		fmt.Fprintln(stderr, "collector autopilot:", err)
		return 2
	}
	n, ds, cut, err := replayFile(*replay, e, func(d autopilot.Decision) error {
		if *format == "json" {
			return json.NewEncoder(stdout).Encode(d)
		}
		_, err := fmt.Fprintln(stdout, d)
		return err
	})
	if err != nil {
		fmt.Fprintln(stderr, "collector autopilot:", err)
		return 1
	}
	if cut {
		fmt.Fprintln(stderr, "the recording stops mid-write (qtop still recording, or stopped): replayed up to its last whole snapshot")
	}
	fmt.Fprintf(stderr, "%d snapshots, %d decisions, %d actions active at the end\n", n, ds, len(e.Active()))
	return 0
}

// readAutopilot reads a policy's autopilot part, or the part alone.
func readAutopilot(path string) (policy.Autopilot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return policy.Autopilot{}, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return policy.Autopilot{}, fmt.Errorf("--policy %s: %w", path, err)
	}
	if part, ok := top["autopilot"]; ok {
		b = part
	}
	var a policy.Autopilot
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return policy.Autopilot{}, fmt.Errorf("--policy %s: the autopilot part: %w", path, err)
	}
	return a, nil
}

// replayFile feeds every snapshot of a recording to e, in order, and
// hands each decision to out; it returns the snapshots and decisions, and
// whether the recording stops mid-write (a gzip stream cut off, a last
// line without its end, as qtop leaves while it records): its whole
// snapshots are replayed, as qtop replay does.
func replayFile(path string, e *autopilot.Engine, out func(autopilot.Decision) error) (snapshots, decisions int, cut bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return 0, 0, false, fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxEventBytes)
	var hdr struct {
		Version int `json:"qtop_recording"`
	}
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &hdr) != nil || hdr.Version == 0 {
		return 0, 0, false, fmt.Errorf("%s does not start with a qtop recording header (qtop --record writes one)", path)
	}
	var bad error // a line that does not decode: an error unless it is the last
	for sc.Scan() {
		if bad != nil {
			return snapshots, decisions, false, bad
		}
		var l struct {
			Snapshot *api.Snapshot `json:"snapshot"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			bad = fmt.Errorf("%s, snapshot %d: %w", path, snapshots+1, err)
			continue
		}
		if l.Snapshot == nil {
			continue
		}
		snapshots++
		for _, d := range e.Step(l.Snapshot) {
			decisions++
			if err := out(d); err != nil {
				return snapshots, decisions, false, err
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return snapshots, decisions, false, fmt.Errorf("%s: %w", path, err)
	} else if err != nil {
		cut = true
	}
	return snapshots, decisions, cut || bad != nil, nil
}
