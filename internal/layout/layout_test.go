package layout

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/qtop-dev/qtop"

// libraries are the packages an application imports.
var libraries = []string{"tenant", "sqlcomment", "sqlcomment/comment", "sqlcomment/pgxcomment", "spacesaving", "topn", "ratio",
	"policy", "enforce", "meter", "meter/otelmeter", "meter/sqlmeter", "report", "freshness", "budget", "histogram", "api", "agent",
	"hotkey", "fairqueue", "gcra", "ru", "incident", "autopilot"}

// TestGCRAIsALeaf: the token bucket that the enforcer, the quota gate, the
// budgets and the collector share depends on the standard library alone.
func TestGCRAIsALeaf(t *testing.T) {
	for _, dep := range goList(t, `{{if not .Standard}}{{.ImportPath}}{{end}}`, module+"/gcra") {
		if dep != module+"/gcra" {
			t.Errorf("gcra depends on %s", dep)
		}
	}
}

// TestAutopilotDeps: the autopilot reads snapshots (api) through the
// headline qtop shows (incident) and writes policy parts: inside qtop it
// depends on api, incident, policy and tenant alone (no store, no
// collector), and incident on api and what api links.
func TestAutopilotDeps(t *testing.T) {
	allowed := map[string]bool{module + "/autopilot": true, module + "/incident": true, module + "/api": true, module + "/policy": true, module + "/tenant": true}
	for _, dep := range goList(t, `{{if not .Standard}}{{.ImportPath}}{{end}}`, module+"/autopilot") {
		if strings.HasPrefix(dep, module+"/") && !allowed[dep] {
			t.Errorf("autopilot depends on %s", dep)
		}
	}
	for _, dep := range goList(t, `{{if not .Standard}}{{.ImportPath}}{{end}}`, module+"/incident") {
		if dep == module+"/autopilot" {
			t.Errorf("incident depends on %s", dep)
		}
	}
}

func goList(t *testing.T, format string, pkgs ...string) []string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", format}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestLibrariesFreeOfCgo(t *testing.T) {
	pkgs := make([]string, len(libraries))
	for i, p := range libraries {
		pkgs[i] = module + "/" + p
	}
	// Outside the standard library (whose net and os/user have optional
	// cgo files), no dependency may have cgo files.
	if cgo := goList(t, `{{if and (not .Standard) .CgoFiles}}{{.ImportPath}}{{end}}`, pkgs...); len(cgo) > 0 {
		t.Errorf("library packages depend on cgo packages: %v", cgo)
	}
	for _, dep := range goList(t, `{{.ImportPath}}`, pkgs...) {
		if strings.Contains(dep, "duckdb") || strings.HasPrefix(dep, module+"/store") || strings.HasPrefix(dep, module+"/internal/") {
			t.Errorf("a library package depends on %s", dep)
		}
	}
}

// TestTUIDoesNotLinkTheCollector: the TUI reads sources through its Source
// interface; the demo source, which runs a collector, lives in
// internal/demo, so the TUI links neither the collector nor DuckDB.
func TestTUIDoesNotLinkTheCollector(t *testing.T) {
	for _, dep := range goList(t, `{{.ImportPath}}`, module+"/internal/tui") {
		if dep == module+"/internal/collector" || strings.HasPrefix(dep, module+"/store") || strings.Contains(dep, "duckdb") {
			t.Errorf("internal/tui depends on %s", dep)
		}
	}
}

// TestReportContract: the wire contract (package report) depends inside
// qtop only on tenant, histogram and spacesaving; the collector reads
// reports through it, so it links neither the OpenTelemetry SDK (the span
// processor is meter/otelmeter) nor the sending side's SQL hooks
// (meter/sqlmeter), nor the database/sql wrapper sqlcomment: it reads the
// comment format (Parse, Shape, the Key constants, the session tag)
// through sqlcomment/comment, which links neither sqlcomment nor cgo.
func TestReportContract(t *testing.T) {
	allowed := map[string]bool{module + "/report": true, module + "/tenant": true, module + "/histogram": true, module + "/spacesaving": true}
	for _, dep := range goList(t, `{{.ImportPath}}`, module+"/report") {
		if strings.HasPrefix(dep, module+"/") && !allowed[dep] {
			t.Errorf("report depends on %s", dep)
		}
	}
	for _, dep := range goList(t, `{{.ImportPath}}`, module+"/internal/collector", module+"/meter") {
		if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, module+"/meter/") {
			t.Errorf("the collector or the meter core depends on %s", dep)
		}
	}
	for _, dep := range goList(t, `{{.ImportPath}}`, module+"/internal/collector") {
		if dep == module+"/sqlcomment" {
			t.Errorf("the collector depends on %s (read the comment format through sqlcomment/comment)", dep)
		}
	}
	inside := map[string]bool{module + "/sqlcomment/comment": true, module + "/sqlcomment/internal/lex": true, module + "/tenant": true}
	for _, dep := range goList(t, `{{.ImportPath}}`, module+"/sqlcomment/comment") {
		if strings.HasPrefix(dep, module+"/") && !inside[dep] {
			t.Errorf("sqlcomment/comment depends on %s", dep)
		}
	}
	for _, dep := range goList(t, `{{.ImportPath}}`, module+"/meter") {
		if dep == module+"/sqlcomment" {
			t.Errorf("the meter core depends on %s", dep)
		}
	}
}

// TestEnvoyTypesOnlyInTheCollector: Envoy's generated types
// (go-control-plane) are large; only the collector binary links them,
// through internal/envoyrls, which cmd/collector wires in. Package
// collector takes the service through an interface, so that qtop (which
// links the collector for its demo) and every library stay without them.
func TestEnvoyTypesOnlyInTheCollector(t *testing.T) {
	allowed := map[string]bool{module + "/internal/envoyrls": true, module + "/cmd/collector": true}
	for _, line := range goList(t, `{{.ImportPath}} {{join .Deps " "}}`, "./...") {
		pkg, deps, _ := strings.Cut(line, " ")
		if allowed[pkg] || !strings.HasPrefix(pkg, module+"/") {
			continue // -deps lists every dependency too
		}
		for _, dep := range strings.Fields(deps) {
			if strings.HasPrefix(dep, "github.com/envoyproxy/") {
				t.Errorf("%s links %s (only internal/envoyrls and cmd/collector may)", pkg, dep)
				break
			}
		}
	}
}
