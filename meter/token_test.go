package meter

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// renameInto writes data to a new file in dir and renames it to name, as
// a rotation does.
func renameInto(t *testing.T, dir, name, data string) {
	t.Helper()
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// TestReporterTokenFile: the token file is read again when another file
// is renamed over it, so a rotation needs no restart; a file that turns
// empty keeps the last token and is logged once.
func TestReporterTokenFile(t *testing.T) {
	dir := t.TempDir()
	renameInto(t, dir, "report.token", "one\n")
	c := newCollector(t)
	c.setToken("one")
	var out lockedBuffer
	r := newReporter(t, c, mustRecorder(), WithTokenFile(filepath.Join(dir, "report.token")),
		WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	steps := []struct{ file, collector string }{
		{"", "one"},
		{"two\n", "two"},
		{"three", "three"},
		{"  \n", "three"}, // empty: the last token stays
		{"four", "four"},
	}
	for i, s := range steps {
		if s.file != "" {
			renameInto(t, dir, "report.token", s.file)
		}
		c.setToken(s.collector)
		if wait := sendOnce(t, r); wait != 0 || r.QueueLen() != 0 {
			t.Fatalf("step %d: token %q not used: wait %v, queued %d", i, s.collector, wait, r.QueueLen())
		}
	}
	if n := strings.Count(strings.Join(out.lines(), "\n"), "token file cannot be read"); n != 1 {
		t.Errorf("the empty file logged %d times, want 1:\n%s", n, strings.Join(out.lines(), "\n"))
	}
}

// TestReporterTokenFileSymlinkSwap: a Kubernetes Secret volume swaps its
// ..data symlink to a new directory; the token file's path does not
// change, the file it leads to does.
func TestReporterTokenFileSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, token string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "token"), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", "one")
	if err := os.Symlink("..data/token", filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	c := newCollector(t)
	c.setToken("one")
	r := newReporter(t, c, mustRecorder(), WithTokenFile(filepath.Join(dir, "token")))
	if wait := sendOnce(t, r); wait != 0 {
		t.Fatalf("first token refused")
	}
	version("..v2", "two") // same size as "one": the file's identity tells
	c.setToken("two")
	if wait := sendOnce(t, r); wait != 0 || r.QueueLen() != 0 {
		t.Fatalf("the swapped token was not read: queued %d", r.QueueLen())
	}
}

func TestReporterTokenFileMissing(t *testing.T) {
	_, err := NewReporter("http://collector/v1/reports", mustRecorder(), WithTokenFile(filepath.Join(t.TempDir(), "none")))
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("missing token file: %v, want ErrInvalid", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := NewReporter("http://collector/v1/reports", mustRecorder(), WithTokenFile(empty)); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty token file: %v, want ErrInvalid", err)
	}
}
