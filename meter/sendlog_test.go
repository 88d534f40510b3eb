package meter

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log destination safe for the reporter's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// TestReporterSaysWhenReportsFail: the reporter's logger hears once that
// reports fail (with what to do about a refused token), again after a
// minute of failures, once when they are delivered again, and again when
// a later failure starts; nothing while reports go through.
func TestReporterSaysWhenReportsFail(t *testing.T) {
	c := newCollector(t)
	var out lockedBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	var mu sync.Mutex
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := newReporter(t, c, mustRecorder(), WithLogger(log), WithClock(clock))
	flush := func(mode string, at time.Duration) {
		t.Helper()
		c.setMode(mode)
		mu.Lock()
		now = t0.Add(at)
		mu.Unlock()
		if mode != "ok" {
			// Kept and retried: one attempt, whatever the backoff.
			r.mu.Lock()
			r.retryAt = time.Time{}
			r.mu.Unlock()
			sendOnce(t, r)
			return
		}
		if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatalf("%s at %v: %v", mode, at, err)
		}
	}
	flush("ok", 0)
	flush("401", time.Second)
	flush("401", 10*time.Second)
	flush("401", 61*time.Second) // a minute after the first
	flush("ok", 62*time.Second)
	flush("ok", 63*time.Second)
	flush("down", 64*time.Second)
	got := out.lines()
	hint := `hint="the collector refused the report token; reports are kept (up to the queue's bound) and sent once it takes the token: check QTOP_TOKEN or QTOP_TOKEN_FILE (--token, --token-file) against the collector's (a token file is read again when it changes; a --token or QTOP_TOKEN takes a restart)"`
	want := []string{
		`level=WARN msg="meter: reports to the collector failing" err="meter: collector ` + c.srv.URL + `/v1/reports answered 401: unknown token" report="kept to send again" ` + hint,
		`level=WARN msg="meter: reports to the collector still failing" err="meter: collector ` + c.srv.URL + `/v1/reports answered 401: unknown token" report="kept to send again" ` + hint + ` failures=3 since=2026-12-03T09:00:01Z`,
		`level=INFO msg="meter: reports to the collector delivered again" failures=3 for=1m1s dropped=0`,
	}
	if len(got) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, got[i], w)
		}
	}
	if !strings.HasPrefix(got[3], `level=WARN msg="meter: reports to the collector failing"`) || !strings.Contains(got[3], `report="kept to send again"`) {
		t.Errorf("line 4, the collector gone: %s", got[3])
	}
}

// TestReporterSaysWhenRepliesAreUnreadable: a 2xx that is not a
// collector's reply (something else answers at the collector's URL) is
// counted as sent, and the logger hears of it once a minute, with what to
// check.
func TestReporterSaysWhenRepliesAreUnreadable(t *testing.T) {
	c := newCollector(t)
	var out lockedBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	var mu sync.Mutex
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := newReporter(t, c, mustRecorder(), WithLogger(log), WithClock(clock))
	c.setMode("garbage200")
	for _, at := range []time.Duration{0, time.Second, 30 * time.Second, 61 * time.Second} {
		mu.Lock()
		now = t0.Add(at)
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.ForceFlush(ctx)
		cancel()
		if err != nil {
			t.Fatalf("flush at %v: %v", at, err)
		}
	}
	got := out.lines()
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2 (at 0 and after a minute):\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, l := range got {
		if !strings.HasPrefix(l, `level=WARN msg="meter: the collector's reply to a report could not be read"`) || !strings.Contains(l, "hint=") {
			t.Errorf("line %s", l)
		}
	}
}

// testLog is a logger without times, for comparing lines.
func testLog(out *lockedBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// fakeClock is a clock at t0 until at moves it to t0+d.
func fakeClock(t0 time.Time) (at func(d time.Duration), clock func() time.Time) {
	var mu sync.Mutex
	now := t0
	return func(d time.Duration) { mu.Lock(); now = t0.Add(d); mu.Unlock() },
		func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
}

// TestReporterSaysWhenQueueDrops: reports dropped from a full queue (an
// outage longer than the queue covers) are said at once, with how many
// since when, again at most once a minute, and counted in the line that
// says reports are delivered again.
func TestReporterSaysWhenQueueDrops(t *testing.T) {
	c := newCollector(t)
	var out lockedBuffer
	at, clock := fakeClock(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	r := newReporter(t, c, mustRecorder(), WithLogger(testLog(&out)), WithClock(clock), WithQueueLen(2))
	for _, d := range []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 70 * time.Second} {
		at(d)
		r.cut(false) // nothing is sent: the queue fills as in an outage
	}
	at(71 * time.Second)
	if wait := r.drain(ctxTimeout(t, 10*time.Second), 0); wait != 0 || r.QueueLen() != 0 {
		t.Fatalf("drain: wait %v, %d left", wait, r.QueueLen())
	}
	got := out.lines()
	want := []string{
		`level=WARN msg="meter: report queue full: the oldest reports are dropped" dropped=1 since=2026-12-03T09:00:02Z queue=2 hint="the queue holds one report an interval: raise WithQueueLen (the gate's --report-queue) to ride out longer collector outages"`,
		`level=WARN msg="meter: report queue full: the oldest reports are dropped" dropped=3 since=2026-12-03T09:00:02Z queue=2 hint="the queue holds one report an interval: raise WithQueueLen (the gate's --report-queue) to ride out longer collector outages"`,
		`level=INFO msg="meter: reports to the collector delivered again" failures=0 for=1m9s dropped=3`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReporterPacedIsNotFailure: during a backlog replay the collector's
// per-source limit answers 429 with a delay. That is pacing: the log does
// not flip between failing and delivered, the wait is the reply's exact
// delay (not the header's whole second) with no backoff added, and the
// error says its delay once. Only a limit that lets nothing through for a
// minute is said.
func TestReporterPacedIsNotFailure(t *testing.T) {
	c := newCollector(t)
	var out lockedBuffer
	at, clock := fakeClock(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	r := newReporter(t, c, mustRecorder(), WithLogger(testLog(&out)), WithClock(clock), WithBackoff(time.Second, time.Minute))

	c.setMode("down")
	sendOnce(t, r) // the outage: failing
	c.setMode("ok")
	at(time.Second)
	r.retryAt = time.Time{}
	sendOnce(t, r) // back: delivered again
	for i, d := range []time.Duration{2 * time.Second, 3 * time.Second, 4 * time.Second} {
		at(d)
		c.setMode("paced")
		if wait := sendOnce(t, r); wait <= 0 || wait > 100*time.Millisecond {
			t.Errorf("replay %d: paced wait %v, want the reply's 100ms", i, wait)
		}
		if r.attempt != 0 {
			t.Errorf("replay %d: attempt %d: pacing is not a failure to back off from", i, r.attempt)
		}
		c.setMode("ok")
		r.retryAt = time.Time{}
		if wait := r.drain(ctxTimeout(t, 10*time.Second), 0); wait != 0 {
			t.Fatalf("replay %d: not delivered", i)
		}
	}
	c.setMode("paced")
	_, err := r.post(ctxTimeout(t, 10*time.Second), nil, 0)
	if n := strings.Count(err.Error(), "retry after"); n != 1 || !strings.HasSuffix(err.Error(), "limit (retry after 100ms)") {
		t.Errorf("paced error %q: want its delay said once", err)
	}
	for _, d := range []time.Duration{5 * time.Second, 30 * time.Second, 65 * time.Second, 70 * time.Second, 126 * time.Second} {
		at(d)
		r.retryAt = time.Time{}
		sendOnce(t, r) // a limit that lets nothing through
	}
	got := out.lines()
	if len(got) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, p := range []string{
		`level=WARN msg="meter: reports to the collector failing"`,
		`level=INFO msg="meter: reports to the collector delivered again"`,
		`level=WARN msg="meter: the collector's rate limit has let no report through"`,
		`level=WARN msg="meter: the collector's rate limit has let no report through"`,
	} {
		if !strings.HasPrefix(got[i], p) {
			t.Errorf("line %d: %s\nwant %s…", i+1, got[i], p)
		}
	}
}
