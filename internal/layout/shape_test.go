package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The shape limits of the main module's code (tests and generated code
// excepted): a struct with more fields, a type with more methods or a
// function with more lines is a sign that it does several jobs, and the
// last stops had to remove copies that such shapes produced.
const (
	maxStructFields = 25
	maxMethods      = 30
	maxFuncLines    = 80
)

// tables are the functions allowed above maxFuncLines because they are a
// table (one entry a line), not logic. Each says why.
var tables = map[string]string{}

// shapeFile is one parsed non-test Go file of the module.
type shapeFile struct {
	path string // relative to the module root
	dir  string
	file *ast.File
}

func moduleFiles(t *testing.T) (*token.FileSet, []shapeFile) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []shapeFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// bench/ and deploy checks are modules of their own.
			if p != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || fileExists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, shapeFile{path: rel, dir: filepath.Dir(rel), file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

// TestShapeLimits: no struct over maxStructFields fields, no type with
// over maxMethods methods, no function over maxFuncLines lines.
func TestShapeLimits(t *testing.T) {
	fset, files := moduleFiles(t)
	methods := map[string]int{}
	for _, sf := range files {
		ast.Inspect(sf.file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.TypeSpec:
				if st, ok := x.Type.(*ast.StructType); ok {
					if c := fieldCount(st); c > maxStructFields {
						t.Errorf("%s: struct %s has %d fields, at most %d", sf.path, x.Name.Name, c, maxStructFields)
					}
				}
			case *ast.FuncDecl:
				lines := fset.Position(x.End()).Line - fset.Position(x.Pos()).Line + 1
				key := sf.dir + "." + x.Name.Name
				if recv := receiverName(x); recv != "" {
					methods[sf.dir+"."+recv]++
					key = sf.dir + "." + recv + "." + x.Name.Name
				}
				if _, ok := tables[key]; !ok && lines > maxFuncLines {
					t.Errorf("%s: %s has %d lines, at most %d", sf.path, key, lines, maxFuncLines)
				}
			}
			return true
		})
	}
	for typ, n := range methods {
		if n > maxMethods {
			t.Errorf("type %s has %d methods, at most %d", typ, n, maxMethods)
		}
	}
}

func fieldCount(st *ast.StructType) int {
	c := 0
	for _, f := range st.Fields.List {
		c += max(len(f.Names), 1)
	}
	return c
}

func receiverName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestEnforceSurface: enforce is the request path's admission (buckets,
// prices, shedding, CoDel, the HTTP stage), not a catch-all; it exports
// at most maxEnforceNames top-level names.
func TestEnforceSurface(t *testing.T) {
	const maxEnforceNames = 60
	_, files := moduleFiles(t)
	var names []string
	for _, sf := range files {
		if sf.dir != "enforce" {
			continue
		}
		names = append(names, exportedNames(sf.file)...)
	}
	if len(names) > maxEnforceNames {
		t.Errorf("enforce exports %d top-level names, at most %d: %v", len(names), maxEnforceNames, names)
	}
}

// exportedNames lists a file's exported top-level types, functions,
// constants and variables (methods and fields are not counted).
func exportedNames(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch x := d.(type) {
		case *ast.FuncDecl:
			if x.Recv == nil && x.Name.IsExported() {
				names = append(names, x.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range x.Specs {
				switch sp := s.(type) {
				case *ast.TypeSpec:
					if sp.Name.IsExported() {
						names = append(names, sp.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}
