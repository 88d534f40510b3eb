package tui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// hostile is what a stranger's collector or recording may put in any
// text: a screen clear, a clipboard write (OSC 52), a C1 CSI, and a
// right-to-left override that reorders the rest of the line.
const hostile = "\x1b[2J\x1b]52;c;cHduZWQ=\x07\u009b31m\u202e"

// unsafeOnScreen reports the first character of s that data could use to
// drive the terminal, or "".
func unsafeOnScreen(s string) string {
	for _, r := range s {
		if r != '\n' && unsafeRune(r) {
			return string(r)
		}
	}
	return ""
}

// poison prefixes every string reachable from v with hostile, filling
// nil pointers and empty slices (one element) down to depth levels so
// that every field of the snapshot carries it.
func poison(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(hostile + v.String())
		}
	case reflect.Pointer:
		if v.IsNil() && depth > 0 && v.CanSet() && v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if !v.IsNil() {
			poison(v.Elem(), depth-1)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				poison(v.Field(i), depth)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 && depth > 0 && v.CanSet() {
			v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
		}
		for i := range v.Len() {
			poison(v.Index(i), depth-1)
		}
	case reflect.Array:
		for i := range v.Len() {
			poison(v.Index(i), depth-1)
		}
	case reflect.Map:
		if v.IsNil() || v.Type().Key().Kind() != reflect.String {
			return
		}
		n := reflect.MakeMap(v.Type())
		for it := v.MapRange(); it.Next(); {
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(it.Value())
			poison(val, depth-1)
			n.SetMapIndex(reflect.ValueOf(hostile+it.Key().String()).Convert(v.Type().Key()), val)
		}
		v.Set(n)
	}
}

func hostileSnapshot() api.Snapshot {
	s := incident()
	s.Autopilot = &api.AutopilotStatus{Active: []api.AutopilotRow{{Tenant: "bigcorp", Action: "throttle", Unit: "RU/s", Limit: 10, Expires: t0.Add(time.Minute)}}}
	poison(reflect.ValueOf(&s).Elem(), 4)
	return s
}

// hostileSource is a source whose own description (a recording's header,
// a collector's address) carries hostile text.
type hostileSource struct{ *fakeSource }

func (hostileSource) Describe() string { return "replay x (" + hostile + ")" }

// TestNoEscapesAnywhere: whatever text a collector or a recording sends,
// in any field, no view, overlay, prompt or status prints a character
// that drives the terminal.
func TestNoEscapesAnywhere(t *testing.T) {
	walks := [][]string{
		{"1"}, {"2"}, {"3"}, {"3", "v"}, {"4"}, {"5"}, {"6"}, {"7"}, {"8"}, {"9"},
		{"1", "enter"}, {"8", "enter"}, {"1", "t"}, {"1", "t", "enter"}, {"?"}, {"p"},
		{"1", "/", "x"}, {"3", "c"}, {"6", "k"}, {"5", "x"},
	}
	for _, w := range []int{120, 60} {
		for _, keys := range walks {
			src := newFake(Features{Throttle: true, Signal: true})
			m := New(hostileSource{src}, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithUser("alice"), WithLocation(time.UTC))
			m.Update(tea.WindowSizeMsg{Width: w, Height: 30})
			if c := unsafeOnScreen(m.View()); c != "" {
				t.Fatalf("waiting screen prints %q:\n%q", c, m.View())
			}
			m.Update(snapshotMsg{hostileSnapshot()})
			press(m, keys...)
			if c := unsafeOnScreen(m.View()); c != "" {
				t.Errorf("%dx30, keys %v: the screen prints %q:\n%s", w, keys, c, around(m.View(), c))
			}
		}
	}
	for _, format := range []string{FormatTable, FormatJSON} {
		var b bytes.Buffer
		if err := Print(&b, hostileSnapshot(), format); err != nil {
			t.Fatal(err)
		}
		if c := unsafeOnScreen(strings.ReplaceAll(b.String(), "\t", " ")); c != "" {
			t.Fatalf("--once --format %s prints %q:\n%q", format, c, b.String())
		}
	}
}

func around(s, c string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, c) {
			out = append(out, fmt.Sprintf("%q", l))
		}
	}
	return strings.Join(out, "\n")
}

// fullDisk fails every write after the first n bytes, as a disk that
// fills up during an incident does.
type fullDisk struct{ left int }

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) > d.left {
		n := d.left
		d.left = 0
		return n, syscall.ENOSPC
	}
	d.left -= len(p)
	return len(p), nil
}

// TestRecordingStoppedLiveViewGoesOn: a recording that cannot be written
// (the disk filled) says so once and in the title, and the live view goes
// on with every snapshot: it never freezes on the last one recorded.
func TestRecordingStoppedLiveViewGoesOn(t *testing.T) {
	src := newFake(Features{Throttle: true})
	defer src.Close()
	rec := &Recorder{Source: src, w: &fullDisk{left: 10}}
	m := New(rec, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 30})
	for i, tenant := range []string{"bigcorp", "acme", "globex"} {
		s := incident()
		s.Tenants[0].Tenant = tenant
		src.snaps <- s
		m.fetching = false
		m.Update(m.fetch()())
		screen := m.View()
		if m.err != nil || m.snap == nil || m.snap.Tenants[0].Tenant != tenant {
			t.Fatalf("snapshot %d: error %v, shown %v:\n%s", i, m.err, m.snap != nil, screen)
		}
		mustContain(t, screen, "recording stopped: no space left on device")
		if i == 0 {
			mustContain(t, screen, "the live view goes on, unrecorded")
		}
	}
}

// killedRecording records n snapshots into path and returns the file as
// the recording qtop left when it was killed: never closed.
func killedRecording(t *testing.T, path string, n int) []byte {
	t.Helper()
	src := newFake(Features{})
	defer src.Close()
	rec, err := NewRecorder(src, path, t0, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		s := incident()
		s.Time = t0.Add(time.Duration(i) * time.Second)
		src.snaps <- s
		if _, err := rec.Next(context.Background(), Query{}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path) // what the disk holds; rec is never closed
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplayCutShort: a recording whose qtop was killed (gzip never
// closed, a last line half written) plays up to its last whole snapshot,
// --once included, and says that it ended early instead of retrying a
// file forever or refusing the whole recording.
func TestReplayCutShort(t *testing.T) {
	dir := t.TempDir()
	gz := killedRecording(t, filepath.Join(dir, "killed.qtop.gz"), 3)
	plain := killedRecording(t, filepath.Join(dir, "killed.qtop"), 3)
	cases := map[string][]byte{
		"killed.qtop.gz":        gz,
		"cut.qtop.gz":           gz[:len(gz)-7],
		"half-a-line.qtop":      plain[:len(plain)-40],
		"whole-lines-only.qtop": plain,
	}
	for name, b := range cases {
		path := filepath.Join(dir, "copy-"+name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReplay(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, err := r.Last()
		if err != nil || s.Time.IsZero() {
			t.Fatalf("%s: last: %v", name, err)
		}
		r.Close()
		// Played: the snapshots, then the end, said.
		synctest.Test(t, func(t *testing.T) {
			r, _ := OpenReplay(path, WithSpeed(1000))
			defer r.Close()
			r.sleep = func(context.Context, time.Duration) error { return nil }
			var n int
			playToEnd(t, r, func(api.Snapshot) { n++ })
			cut := name != "whole-lines-only.qtop" // a gzip stream never closed lacks its end too
			if n < 2 || (!cut && n != 3) || (cut != (r.CutShort() != nil)) {
				t.Fatalf("%s: %d snapshots, cut short %v", name, n, r.CutShort())
			}
			if cut && !strings.Contains(r.Describe(), "ended early: the recording stops short of its end") {
				t.Fatalf("%s: describe %q", name, r.Describe())
			}
		})
	}
}

// silentCollector answers each connection's stream with one snapshot,
// then says nothing more, holding the connection open (a collector
// behind a half-open TCP connection, or a server that is no collector).
// It counts the connections; its conns are in-memory pipes, so the test
// runs on synctest's clock.
type silentCollector struct {
	mu    sync.Mutex
	conns int
}

func (sc *silentCollector) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		c, s := net.Pipe()
		sc.mu.Lock()
		sc.conns++
		sc.mu.Unlock()
		go sc.serve(s)
		return c, nil
	}}}
}

func (sc *silentCollector) serve(conn net.Conn) {
	defer conn.Close()
	if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
		return
	}
	b, _ := json.Marshal(incident())
	fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\nevent: snapshot\ndata: %s\n\n", b)
	io.Copy(io.Discard, conn) // silent until the client leaves
}

// TestCollectorSilentStream: a stream that goes silent is not shown as
// live for ever: after staleAfter without a snapshot Next says so, and
// the next Next connects again.
func TestCollectorSilentStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sc silentCollector
		src, err := NewCollector("127.0.0.1:7070", "", api.WithHTTPClient(sc.client()))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		ctx := context.Background()
		if _, err := src.Next(ctx, Query{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = src.Next(ctx, Query{})
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "sent no snapshot for 10s") || time.Since(start) != staleAfter {
			t.Fatalf("after %s: %v", time.Since(start), err)
		}
		if _, err := src.Next(ctx, Query{}); err != nil {
			t.Fatal(err)
		}
		sc.mu.Lock()
		defer sc.mu.Unlock()
		if sc.conns != 2 {
			t.Fatalf("%d connections, want 2 (one again after the silence)", sc.conns)
		}
	})
}
