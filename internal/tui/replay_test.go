package tui

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// playToEnd plays r until it ends, calling each with every snapshot. It
// runs in a synctest bubble, r opened in it: the end is when Next blocks,
// waiting for a snapshot that never comes (r.sleep is stubbed, so it
// blocks nowhere else), and its context is then cancelled.
func playToEnd(t *testing.T, r *Replay, each func(api.Snapshot)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		synctest.Wait()
		cancel()
	}()
	for {
		s, err := r.Next(ctx, Query{})
		if errors.Is(err, context.Canceled) {
			return // the end
		}
		if err != nil {
			t.Fatal(err)
		}
		each(s)
	}
}

// TestReplayRecordedIncident plays the recorded demo incident of the
// repository's testdata folder: the noisy tenant ends on top and the
// summary names it.
func TestReplayRecordedIncident(t *testing.T) {
	synctest.Test(t, testReplayRecordedIncident)
}

func testReplayRecordedIncident(t *testing.T) {
	r, err := OpenReplay("../../testdata/incident/demo.qtop.gz", WithSpeed(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var waited time.Duration
	r.sleep = func(_ context.Context, d time.Duration) error { waited += d; return nil }
	ctx := context.Background()
	var (
		in    summary
		n     int
		last  api.Snapshot
		drove bool
	)
	playToEnd(t, r, func(s api.Snapshot) {
		n++
		last = s
		in.add(&s)
		drove = drove || strings.Contains(in.line, "bigcorp") && strings.Contains(in.line, "victims: ") && !strings.Contains(in.line, "victims: none")
	})
	if n < 30 || last.Tenants[0].Tenant != "bigcorp" || !drove {
		t.Fatalf("%d snapshots, last top %q, summary seen %v (%q)", n, last.Tenants[0].Tenant, drove, in.line)
	}
	if waited <= 0 || waited > time.Second {
		t.Fatalf("waited %s at 1000×", waited)
	}
	if d := r.Describe(); !strings.Contains(d, "demo.qtop.gz") || !strings.Contains(d, "ended") {
		t.Fatalf("describe %q", d)
	}
	if err := r.Throttle(ctx, rule("bigcorp")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("throttle in a replay: %v", err)
	}
	r.Close()
	if _, err := r.Next(ctx, Query{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

// TestRecordThenReplay: what a Recorder passes through replays the same,
// and the same screen comes out of it.
func TestRecordThenReplay(t *testing.T) {
	for _, name := range []string{"rec.qtop", "rec.qtop.gz"} {
		path := filepath.Join(t.TempDir(), name)
		src := newFake(Features{Throttle: true})
		want := []api.Snapshot{incident(), incident()}
		want[1].Time = want[0].Time.Add(time.Second)
		want[1].Tenants[0].RUPerSec = 9999
		for _, s := range want {
			src.snaps <- s
		}
		rec, err := NewRecorder(src, path, t0, false)
		if err != nil {
			t.Fatal(err)
		}
		for range want {
			if _, err := rec.Next(context.Background(), Query{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReplay(path)
		if err != nil {
			t.Fatal(err)
		}
		r.sleep = func(context.Context, time.Duration) error { return nil }
		var got []api.Snapshot
		for range want {
			s, err := r.Next(context.Background(), Query{})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if got[1].Tenants[0].RUPerSec != 9999 || !got[1].Time.Equal(want[1].Time) || len(got[0].Blocked) != 3 {
			t.Fatalf("%s: replayed %+v", name, got[1].Tenants[0])
		}
		m := New(r, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
		m.Update(snapshotMsg{got[0]})
		mustContain(t, m.View(), "replay "+name, "bigcorp")
		r.Close()
	}
}

func TestReplayBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, body := range map[string]string{
		"empty":   "",
		"notrec":  `{"tenants":[]}` + "\n",
		"newer":   `{"qtop_recording":99}` + "\n",
		"toolong": strings.Repeat("x", api.MaxEventBytes+10),
	} {
		if _, err := OpenReplay(write(name, body)); !errors.Is(err, ErrRecording) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := OpenReplay(write("bad.gz", "not gzip")); !errors.Is(err, ErrRecording) {
		t.Errorf("bad gzip: %v", err)
	}
	if _, err := OpenReplay(filepath.Join(dir, "missing")); !errors.Is(err, ErrInput) {
		t.Errorf("missing: %v", err)
	}
	p := write("badline", `{"qtop_recording":1}`+"\n"+`{"snapshot":{"time":12}}`+"\n")
	r, err := OpenReplay(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(context.Background(), Query{}); !errors.Is(err, ErrRecording) {
		t.Errorf("bad line: %v", err)
	}
	p = write("huge", `{"qtop_recording":1}`+"\n"+strings.Repeat(" ", api.MaxEventBytes+1)+"\n")
	r2, err := OpenReplay(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := r2.Last(); !errors.Is(err, ErrRecording) {
		t.Errorf("line too long: %v", err)
	}
	if _, err := OpenReplay(p, WithSpeed(0)); !errors.Is(err, ErrInput) {
		t.Errorf("speed 0: %v", err)
	}
	var _ = gzip.NewWriter
}

// cancelAfter is a context cancelled at its nth check (Err), wherever the
// reader is then: the test stops a replay in the middle of a gzip bomb
// without a clock.
type cancelAfter struct {
	context.Context
	n    int
	done chan struct{}
}

func newCancelAfter(n int) *cancelAfter {
	return &cancelAfter{Context: context.Background(), n: n, done: make(chan struct{})}
}

func (c *cancelAfter) Done() <-chan struct{} { return c.done }

func (c *cancelAfter) Err() error {
	if c.n > 0 {
		if c.n--; c.n == 0 {
			close(c.done)
		}
	}
	if c.n == 0 {
		return context.Canceled
	}
	return nil
}

// gzipRecording writes a .gz recording: the header, then lines.
func gzipRecording(t *testing.T, path string, lines ...func(w io.Writer)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	fmt.Fprintf(z, `{"qtop_recording":1,"source":"bomb"}`+"\n")
	for _, l := range lines {
		l(z)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func snapshotLine(s api.Snapshot) func(io.Writer) {
	return func(w io.Writer) {
		b, _ := json.Marshal(recordingLine{Snapshot: &s})
		w.Write(append(b, '\n'))
	}
}

// TestReplayGzipBombHeedsContext: a recording whose gzip stream holds
// millions of lines that are no snapshot between two snapshots (a few
// kB on disk): a Next whose context ends while it reads them returns at
// once with the context's error, having read on no further; a Next with a
// context cancelled already reads nothing; the next Next goes on where it
// stopped and finds the second snapshot.
func TestReplayGzipBombHeedsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bomb.qtop.gz")
	first, second := incident(), incident()
	second.Time = first.Time.Add(time.Second)
	second.Tenants[0].RUPerSec = 9999
	bomb := func(w io.Writer) {
		chunk := bytes.Repeat([]byte("{}\n"), 1<<12)
		for range 1 << 9 { // 6 MiB of "{}\n"
			w.Write(chunk)
		}
	}
	gzipRecording(t, path, snapshotLine(first), bomb, snapshotLine(second))
	r, err := OpenReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.sleep = func(context.Context, time.Duration) error { return nil }
	if _, err := r.Next(context.Background(), Query{}); err != nil {
		t.Fatal(err)
	}
	// The file's offset is what was read of it: nothing more once the
	// context ends.
	f := r.close[len(r.close)-1].(*os.File)
	offset := func() int64 {
		o, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	ctx := newCancelAfter(1000)
	if s, err := r.Next(ctx, Query{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled Next read through the bomb: %v (snapshot at %v)", err, s.Time)
	}
	at := offset()
	if ctx.n != 0 {
		t.Fatalf("the context was checked %d times less than it takes to end it", ctx.n)
	}
	if _, err := r.Next(ctx, Query{}); !errors.Is(err, context.Canceled) || offset() != at {
		t.Fatalf("a Next whose context has ended: %v, read %d bytes more", err, offset()-at)
	}
	if r.Describe() != "replay bomb.qtop.gz (bomb) · 1" {
		t.Fatalf("describe %q", r.Describe())
	}
	s, err := r.Next(context.Background(), Query{})
	if err != nil || s.Tenants[0].RUPerSec != 9999 {
		t.Fatalf("after the bomb: %v, %v", err, s.Tenants[0].RUPerSec)
	}

	// Closed while a Next reads the bomb (qtop quitting): the Next ends
	// with ErrClosed, and the file is closed under no reader (-race).
	// Nothing follows this bomb: however far the Next has read when
	// Close comes, it can end no other way.
	path = filepath.Join(t.TempDir(), "bomb-to-the-end.qtop.gz")
	gzipRecording(t, path, snapshotLine(first), bomb)
	r2, err := OpenReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	r2.sleep = r.sleep
	if _, err := r2.Next(context.Background(), Query{}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r2.Next(context.Background(), Query{})
		errc <- err
	}()
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("a Next reading when the replay closed: %v", err)
	}
}

// TestReplayLongLineMemory: a gzip bomb of one line longer than any
// snapshot costs about that bound in memory, not the doublings of a
// growing buffer (which took ~2× the bound), and ends the replay with
// ErrRecording.
func TestReplayLongLineMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.qtop.gz")
	gzipRecording(t, path, func(w io.Writer) {
		chunk := bytes.Repeat([]byte(" "), 1<<20)
		for range api.MaxEventBytes>>20 + 2 {
			w.Write(chunk)
		}
	})
	r, err := OpenReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = r.Next(context.Background(), Query{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrRecording) {
		t.Fatalf("a line too long: %v", err)
	}
	if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(api.MaxEventBytes)*5/4; got > bound {
		t.Fatalf("reading a line too long allocated %d MiB, want at most %d MiB", got>>20, bound>>20)
	}
	if _, err2 := r.Next(context.Background(), Query{}); !errors.Is(err2, ErrRecording) {
		t.Fatalf("after a line too long: %v", err2)
	}
}

// TestReplayActionsSayReadOnly: t, c and k in a replay say that a replay
// is read only, not that the source is qtop --postgres or lacks one.
func TestReplayActionsSayReadOnly(t *testing.T) {
	r, err := OpenReplay("../../testdata/incident/demo.qtop.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := New(r, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	m.Update(snapshotMsg{incident()})
	for _, k := range []string{"t", "c", "k"} {
		press(m, k)
		if m.state == statePrompt {
			t.Fatalf("%s in a replay opened a prompt: %+v", k, m.prompt)
		}
		mustContain(t, m.View(), "a replay is read only")
		if v := m.View(); strings.Contains(v, "--postgres only reads") || strings.Contains(v, "run qtop --postgres DSN, or") {
			t.Fatalf("%s: a replay's refusal speaks of another source:\n%s", k, v)
		}
	}
}

// TestReplayPauseStopsPlayback: p in a replay stops the recording where it
// is: no snapshot is fetched while paused (before, playback went on
// unseen, and resuming skipped what it had played meanwhile), and
// resuming shows the one held and fetches the next. A live source is
// still fetched while paused, so resuming shows the present.
func TestReplayPauseStopsPlayback(t *testing.T) {
	r, err := OpenReplay("../../testdata/incident/demo.qtop.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	live := newFake(Features{})
	defer live.Close()
	for name, src := range map[string]Source{"replay": r, "live": live} {
		m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
		m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
		press(m, "p")
		m.Update(snapshotMsg{incident()})
		if want := name == "live"; m.fetching != want || m.pending == nil {
			t.Fatalf("%s, paused: fetching %v (want %v), held %v", name, m.fetching, want, m.pending != nil)
		}
		press(m, "p")
		if !m.fetching || m.pending != nil || len(m.snap.Tenants) == 0 {
			t.Fatalf("%s, resumed: fetching %v, still held %v, shown %d tenants", name, m.fetching, m.pending != nil, len(m.snap.Tenants))
		}
	}
}
