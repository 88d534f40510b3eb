package tui

import (
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// TestReplayRecordedIncident plays the recorded demo incident of the
// repository's testdata folder: the noisy tenant ends on top and the
// summary names it.
func TestReplayRecordedIncident(t *testing.T) {
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
	// With the waits stubbed, Next returns each snapshot at once; at the
	// end it waits for its context, which is done already.
	done, cancel := context.WithCancel(ctx)
	cancel()
	for {
		s, err := r.Next(done, Query{})
		if errors.Is(err, context.Canceled) {
			break // the end
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		last = s
		in.add(&s)
		drove = drove || strings.Contains(in.line, "bigcorp") && strings.Contains(in.line, "victims: ") && !strings.Contains(in.line, "victims: none")
	}
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
