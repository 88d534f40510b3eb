package dashboards_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/bubbles/key"

	"github.com/qtop-dev/qtop/dashboards"
	"github.com/qtop-dev/qtop/internal/tui"
	"github.com/qtop-dev/qtop/store"
)

func readRunbook(t *testing.T) string {
	t.Helper()
	b, err := dashboards.FS.ReadFile(dashboards.Runbook)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runbookSection returns the text under the "## name" heading.
func runbookSection(t *testing.T, name string) string {
	t.Helper()
	rb := readRunbook(t)
	i := strings.Index(rb, "\n## "+name+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %s", dashboards.Runbook, name)
	}
	s := rb[i+len(name)+5:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

var (
	flagRE     = regexp.MustCompile(`(?:^|[\s'(])--([a-z][a-z0-9-]*)`)
	commandRE  = regexp.MustCompile(`^collector ([a-z]+)`)
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
)

// TestRunbookCommands: every --flag the runbook gives is a flag of qtop
// or of the collector command, and every collector subcommand exists.
func TestRunbookCommands(t *testing.T) {
	var src strings.Builder
	files, err := filepath.Glob("../cmd/qtop/*.go")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../cmd/collector/*.go")
	for _, f := range append(files, more...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	rb := readRunbook(t)
	// Command lines: lines of code blocks and inline code spans that run
	// qtop or collector.
	var cmds []string
	inCode := false
	for _, line := range strings.Split(rb, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			cmds = append(cmds, line)
			continue
		}
		for _, m := range codeSpanRE.FindAllStringSubmatch(line, -1) {
			cmds = append(cmds, m[1])
		}
	}
	n := 0
	for _, c := range cmds {
		c = strings.TrimSpace(c)
		if !strings.HasPrefix(c, "qtop") && !strings.HasPrefix(c, "collector") && !strings.HasPrefix(c, "--") {
			continue
		}
		for _, m := range flagRE.FindAllStringSubmatch(c, -1) {
			n++
			if !strings.Contains(src.String(), `"`+m[1]+`"`) {
				t.Errorf("%s: --%s (in %q) is not a flag of qtop nor of collector", dashboards.Runbook, m[1], c)
			}
		}
		if m := commandRE.FindStringSubmatch(c); m != nil && !slices.Contains([]string{"serve", "report", "audit", "autopilot", "erase", "help"}, m[1]) {
			t.Errorf("%s: collector %s is not a collector command", dashboards.Runbook, m[1])
		}
	}
	if n < 5 {
		t.Fatalf("only %d flags found in the runbook's commands", n)
	}
}

// bindings adds the keys of every key.Binding in v, a struct whose groups
// of bindings may be embedded or nested structs, to bound.
func bindings(v reflect.Value, bound map[string]bool) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanInterface() {
			continue
		}
		if b, ok := f.Interface().(key.Binding); ok {
			for _, k := range b.Keys() {
				bound[k] = true
			}
		} else if f.Kind() == reflect.Struct {
			bindings(f, bound)
		}
	}
}

var keyRE = regexp.MustCompile("`([^`\\s]|tab|enter|esc)`")

// TestRunbookKeys: every key the runbook names is bound in qtop's keymap
// (y confirms a prompt, which is not a binding of the keymap).
func TestRunbookKeys(t *testing.T) {
	bound := map[string]bool{"y": true}
	bindings(reflect.ValueOf(tui.DefaultKeyMap()), bound)
	keys := keyRE.FindAllStringSubmatch(readRunbook(t), -1)
	if len(keys) < 10 {
		t.Fatalf("only %d keys found in the runbook", len(keys))
	}
	for _, m := range keys {
		if !bound[m[1]] {
			t.Errorf("%s: key %q is not bound in tui.DefaultKeyMap", dashboards.Runbook, m[1])
		}
	}
}

// TestRunbookReasons: the runbook explains every reason the code gives
// for a rejected report and a dropped row.
func TestRunbookReasons(t *testing.T) {
	cat := codeCatalog(t)
	var rejected []string
	for _, l := range cat.series("qtop_collector_reports_rejected_total") {
		rejected = append(rejected, l["reason"])
	}
	if len(rejected) < 3 {
		t.Fatalf("only %q gathered as rejection reasons", rejected)
	}
	sec := runbookSection(t, "QtopCollectorReportsRejected")
	for _, r := range rejected {
		if !strings.Contains(sec, "`"+r+"`") {
			t.Errorf("runbook QtopCollectorReportsRejected does not explain reason %q", r)
		}
	}
	sec = runbookSection(t, "QtopCollectorRowsDropped")
	for _, r := range []string{store.DropSpoolFull, store.DropSpoolCorrupt, store.DropRejected} {
		if !strings.Contains(sec, "`"+r+"`") {
			t.Errorf("runbook QtopCollectorRowsDropped does not explain reason %q", r)
		}
	}
}
