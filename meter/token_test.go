package meter

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestReporterTokenFileRewrittenAlike: a token rewritten in place with
// one of the same length inside the file system's clock tick leaves the
// file's identity, size and mtime as they were (here: mtime set back);
// the file is read again once the last read is TokenReread old.
func TestReporterTokenFileRewrittenAlike(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.token")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newCollector(t)
	c.setToken("one")
	r := newReporter(t, c, mustRecorder(), WithTokenFile(path), WithClock(clock))
	if wait := sendOnce(t, r); wait != 0 {
		t.Fatal("first token refused")
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	c.setToken("two")
	mu.Lock()
	now = now.Add(TokenReread - time.Second)
	mu.Unlock()
	if wait := sendOnce(t, r); wait == 0 || r.QueueLen() != 1 {
		t.Fatalf("before TokenReread: wait %v, queued %d; want the old token refused", wait, r.QueueLen())
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("after TokenReread: %v; want the new token read and used", err)
	}
	if got := seqs(c.got()); len(got) != 3 || r.Dropped() != 0 {
		t.Errorf("the collector got %v, dropped %d; want 3 reports, none dropped", got, r.Dropped())
	}
}

// TestFileTokenStatsOnce: each attempt stats the token file once, when
// it changed too (then it is read with that stat kept), when its last
// read is TokenReread old, and when it is gone. Before, a change or a
// reread stat'ed it twice: once to see the change, once again to read.
func TestFileTokenStatsOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.token")
	renameInto(t, dir, "report.token", "one")
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	f, err := newFileToken(path, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	stats := 0
	f.stat = func(name string) (os.FileInfo, error) { stats++; return os.Stat(name) }
	steps := []struct {
		name  string
		do    func()
		token string
	}{
		{"unchanged", func() {}, "one"},
		{"renamed over", func() { renameInto(t, dir, "report.token", "two") }, "two"},
		{"TokenReread old", func() { now = now.Add(TokenReread) }, "two"},
		{"gone", func() { os.Remove(path) }, "two"},
		{"back", func() { renameInto(t, dir, "report.token", "three") }, "three"},
	}
	for _, s := range steps {
		stats = 0
		s.do()
		if got := f.get(); got != s.token || stats != 1 {
			t.Errorf("%s: token %q after %d stats, want %q after 1", s.name, got, stats, s.token)
		}
	}
}
