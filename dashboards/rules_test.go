package dashboards_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/qtop-dev/qtop/dashboards"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/ratio"
)

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rule is a recording or an alerting rule.
type Rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// RuleTests is a promtool rule-test file.
type RuleTests struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Interval       string `yaml:"interval"`
		InputSeries    []any  `yaml:"input_series"`
		PromQLExprTest []any  `yaml:"promql_expr_test"`
		AlertRuleTest  []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func loadYAML(t *testing.T, name string, v any) {
	t.Helper()
	b, err := dashboards.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func loadRules(t *testing.T) []Rule {
	t.Helper()
	var f RuleFile
	loadYAML(t, dashboards.RulesFile, &f)
	var rules []Rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", dashboards.RulesFile)
	}
	return rules
}

// promtool returns the path of promtool, or skips (fails under CI or
// QTOP_REQUIRE_SERVICES=1: scripts/test installs Debian's prometheus).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if testsvc.Required() {
			t.Fatalf("promtool not found (%v); scripts/test installs it from Debian's prometheus package", err)
		}
		t.Skipf("promtool not found (%v); install Debian's prometheus package or run scripts/test", err)
	}
	return p
}

func runPromtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var rulesFound = regexp.MustCompile(`SUCCESS: (\d+) rules found`)

// TestPromtoolCheckRules: the rule file loads in Prometheus, and promtool
// sees as many rules as this package's other tests check.
func TestPromtoolCheckRules(t *testing.T) {
	out, err := runPromtool(t, filepath.Dir(dashboards.RulesFile), "check", "rules", filepath.Base(dashboards.RulesFile))
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	m := rulesFound.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("promtool check rules: no rule count in\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n != len(loadRules(t)) {
		t.Errorf("promtool found %d rules, the YAML holds %d", n, len(loadRules(t)))
	}
}

// TestPromtoolTestRules runs the rules' unit tests.
func TestPromtoolTestRules(t *testing.T) {
	out, err := runPromtool(t, filepath.Dir(dashboards.RulesTestFile), "test", "rules", filepath.Base(dashboards.RulesTestFile))
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules did not report success:\n%s", out)
	}
}

// TestPromtoolFailsOnBrokenRules: the two tests above can fail — promtool
// refuses a rule file with a bad expression, and a rule test whose alert
// does not fire as expected.
func TestPromtoolFailsOnBrokenRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("bad.yml", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: rate(qtop_x[5m]\n")
	if out, err := runPromtool(t, dir, "check", "rules", "bad.yml"); err == nil {
		t.Errorf("promtool check rules accepted a bad expression:\n%s", out)
	}
	write("ok.yml", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: qtop_x > 1\n")
	write("ok.test.yml", `rule_files: [ok.yml]
tests:
  - interval: 1m
    input_series:
      - series: qtop_x
        values: '0x5'
    alert_rule_test:
      - eval_time: 3m
        alertname: A
        exp_alerts:
          - exp_labels: {}
`)
	if out, err := runPromtool(t, dir, "test", "rules", "ok.test.yml"); err == nil {
		t.Errorf("promtool test rules passed a test whose alert never fires:\n%s", out)
	}
}

// TestAlertsComplete: every alert has a severity, summary, description and
// a runbook link to a section of RUNBOOK.md, and a unit test where it
// fires and one where it does not.
func TestAlertsComplete(t *testing.T) {
	var tests RuleTests
	loadYAML(t, dashboards.RulesTestFile, &tests)
	if len(tests.RuleFiles) != 1 || tests.RuleFiles[0] != filepath.Base(dashboards.RulesFile) {
		t.Errorf("%s tests %q, want [%s]", dashboards.RulesTestFile, tests.RuleFiles, filepath.Base(dashboards.RulesFile))
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				quiet[a.Alertname]++
			}
		}
	}
	anchors := runbookAnchors(t)
	alerts := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		const prefix = "dashboards/" + dashboards.Runbook + "#"
		if rb := r.Annotations["runbook"]; !strings.HasPrefix(rb, prefix) {
			t.Errorf("%s: runbook %q does not point into %s", r.Alert, rb, prefix)
		} else if a := strings.TrimPrefix(rb, prefix); !anchors[a] {
			t.Errorf("%s: runbook anchor #%s is not a heading of %s", r.Alert, a, dashboards.Runbook)
		}
		if fires[r.Alert] == 0 {
			t.Errorf("%s: no promtool test where it fires", r.Alert)
		}
		if quiet[r.Alert] == 0 {
			t.Errorf("%s: no promtool test where it does not fire", r.Alert)
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s is tested but not defined", name)
		}
	}
	for name := range quiet {
		if !alerts[name] {
			t.Errorf("%s is tested but not defined", name)
		}
	}
}

// TestLatencyThresholds: the latency alerts use package ratio's band, so
// they page where qtop itself starts to price up and shed.
func TestLatencyThresholds(t *testing.T) {
	want := map[string]float64{"QtopLatencyRatioLow": ratio.DefaultExit, "QtopLatencyRatioCritical": ratio.DefaultEnter}
	for _, r := range loadRules(t) {
		th, ok := want[r.Alert]
		if !ok {
			continue
		}
		delete(want, r.Alert)
		if s := fmt.Sprintf("< %g", th); !strings.Contains(r.Expr, s) {
			t.Errorf("%s: expression %q does not compare with %s (package ratio's default)", r.Alert, r.Expr, s)
		}
	}
	for a := range want {
		t.Errorf("alert %s is missing", a)
	}
	// The fleet dashboard draws the same band.
	found := false
	for _, d := range loadDashboards(t) {
		for _, p := range panels(d.JSON) {
			targets, _ := json.Marshal(p["targets"])
			if p["type"] != "timeseries" || !strings.Contains(string(targets), "qtop_collector_latency_ratio") {
				continue
			}
			found = true
			var steps []float64
			fc, _ := p["fieldConfig"].(map[string]any)
			def, _ := fc["defaults"].(map[string]any)
			th, _ := def["thresholds"].(map[string]any)
			ss, _ := th["steps"].([]any)
			for _, s := range ss {
				if v, ok := s.(map[string]any)["value"].(float64); ok {
					steps = append(steps, v)
				}
			}
			if !slices.Equal(steps, []float64{ratio.DefaultEnter, ratio.DefaultExit}) {
				t.Errorf("%s panel %q: thresholds %v, want package ratio's %v and %v", d.File, p["title"], steps, ratio.DefaultEnter, ratio.DefaultExit)
			}
		}
	}
	if !found {
		t.Error("no dashboard panel draws qtop_collector_latency_ratio")
	}
}

// runbookAnchors returns the GitHub anchors of RUNBOOK.md's headings.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := dashboards.FS.ReadFile(dashboards.Runbook)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[anchor(strings.TrimLeft(line, "# "))] = true
	}
	return anchors
}

// anchor is GitHub's heading slug: lower case, punctuation dropped,
// spaces to hyphens.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var recordNameRE = regexp.MustCompile(`^qtop:[a-z0-9_]+:[a-z0-9_]+$`)

// TestRecordingRulesUsed: recording rules are named level:metric:operation
// and each is read by an alert or a dashboard (no rule costs Prometheus
// evaluations for nothing).
func TestRecordingRulesUsed(t *testing.T) {
	rules := loadRules(t)
	refs := ruleRefs(rules)
	for _, d := range loadDashboards(t) {
		refs = append(refs, dashboardRefs(t, d)...)
	}
	read := map[string]bool{}
	for _, ref := range refs {
		q, err := dashboards.Parse(ref.Expr)
		if err != nil {
			t.Errorf("%s: %v", ref.Where, err)
			continue
		}
		for _, m := range q.Metrics {
			if !strings.HasSuffix(ref.Where, " rule "+m) {
				read[m] = true
			}
		}
	}
	for _, r := range rules {
		if r.Record == "" {
			continue
		}
		if !recordNameRE.MatchString(r.Record) {
			t.Errorf("recording rule %s: name is not qtop:<what>:<operation>", r.Record)
		}
		if !read[r.Record] {
			t.Errorf("recording rule %s is read by no alert and no dashboard", r.Record)
		}
	}
}
