package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// sleepAllowed lists the test files that may still call time.Sleep, each
// with why. Keep it short: a test waits for a condition (polled with a
// deadline) or runs on fake time (testing/synctest, an injected clock),
// it does not sleep and hope.
var sleepAllowed = map[string]string{
	// The worker process of TestSeedRunKill (the test binary run again):
	// its jobs take 40 ms of wall time so that the test can SIGKILL it
	// mid-job and watch its leases expire by Redis's clock across real
	// processes. The job is the workload, not a wait.
	"quota/lease/worker_test.go": "a separate worker process's 40 ms job",
}

// TestTestsDoNotSleep: no test file of the main module calls time.Sleep,
// except inside a testing/synctest bubble (synctest.Test's function, where
// the clock is fake and a sleep is exact) and in the files listed in
// sleepAllowed.
func TestTestsDoNotSleep(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" || isModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		lines, err := sleeps(path)
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			return nil
		}
		seen[rel] = true
		if _, ok := sleepAllowed[rel]; ok {
			return nil
		}
		for _, l := range lines {
			found = append(found, rel+":"+strconv.Itoa(l))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: time.Sleep in a test: wait for a condition with a deadline, or run on fake time (testing/synctest, an injected clock)", f)
	}
	for f := range sleepAllowed {
		if !seen[f] {
			t.Errorf("%s is in sleepAllowed but no longer sleeps: take it out", f)
		}
	}
}

// isModule reports whether dir holds a go.mod of its own (another module).
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// sleeps returns the lines of the file's calls of time.Sleep outside a
// synctest bubble.
func sleeps(path string) ([]int, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	timeName, syncName := importName(f, "time"), importName(f, "testing/synctest")
	if timeName == "" {
		return nil, nil
	}
	var bubbles [][2]token.Pos
	var calls []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch {
		case isSel(call.Fun, timeName, "Sleep"):
			calls = append(calls, call.Pos())
		case syncName != "" && isSel(call.Fun, syncName, "Test") && len(call.Args) == 2:
			if fn, ok := call.Args[1].(*ast.FuncLit); ok {
				bubbles = append(bubbles, [2]token.Pos{fn.Pos(), fn.End()})
			}
		}
		return true
	})
	var lines []int
	for _, c := range calls {
		inBubble := false
		for _, b := range bubbles {
			inBubble = inBubble || (c >= b[0] && c < b[1])
		}
		if !inBubble {
			lines = append(lines, fset.Position(c).Line)
		}
	}
	return lines, nil
}

// importName is the name under which f imports path ("" if it does not).
func importName(f *ast.File, path string) string {
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == path {
			if im.Name != nil {
				return im.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

func isSel(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || s.Sel.Name != name {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == pkg
}
