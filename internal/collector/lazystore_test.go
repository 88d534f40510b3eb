package collector

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/qtop-dev/qtop/store"
)

// A store that cannot be opened keeps being retried; each failure whose
// reason differs from the last is logged at once, and one that stays the
// same once a minute — before, nothing was logged after the first, so a
// collector whose later opens all failed (for another reason) said nothing
// while its spool grew.
func TestLazyStoreLogsFailedOpens(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	clk := &clock{t: t0}
	reason := errors.New("code: 225, no ZooKeeper")
	l := &lazyStore{log: log, now: clk.Now, lastTry: clk.Now(), lastErr: reason,
		open: func(context.Context) (store.Store, error) { return nil, reason }}
	lines := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(buf.String(), "store still not reachable")
	}
	ctx := context.Background()
	for range 10 { // 20 s of retries, the same reason as at start
		clk.Add(retryOpen)
		l.get(ctx)
	}
	if n := lines(); n != 0 {
		t.Fatalf("%d lines for the reason already logged at start", n)
	}
	reason = errors.New("chstore: metrics: duplicate metrics collector registration attempted")
	clk.Add(retryOpen)
	l.get(ctx)
	if n := lines(); n != 1 {
		t.Fatalf("%d lines after the reason changed, want 1", n)
	}
	for range 30 { // one more minute
		clk.Add(retryOpen)
		l.get(ctx)
	}
	if n := lines(); n != 2 {
		t.Fatalf("%d lines after a minute more, want 2", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
