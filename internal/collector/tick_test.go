package collector

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// heldStore is a memStore whose rollup writes wait for release, as a
// DuckDB file's do while it rewrites a closed day as one sorted run.
type heldStore struct {
	*memStore
	started, release chan struct{}
	once             sync.Once
}

func (h *heldStore) WriteRollups(ctx context.Context, rows []store.Rollup) error {
	h.once.Do(func() { close(h.started) })
	<-h.release
	return h.memStore.WriteRollups(ctx, rows)
}

// TestHeldWriteHoldsNoTick runs a server on fake time whose store holds
// the first minute's write for two minutes: meanwhile the once-a-second
// work goes on (the open windows are counted as reports of new minutes
// come in: 3, where a tick that writes would have stopped at 1), and once
// the write ends every minute reaches the store once.
func TestHeldWriteHoldsNoTick(t *testing.T) {
	// The write-ahead log encodes reports with a process-wide zstd encoder
	// made on first use; made inside a bubble, its channels would belong
	// to that bubble and the next bubble (-count 2) could not use it.
	now := time.Now()
	if _, err := (&report.Report{Source: report.Source{Service: "shop", Instance: "a"}, Seq: 1, Start: now.Add(-time.Second), End: now}).MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		st := &heldStore{memStore: newMemStore(), started: make(chan struct{}), release: make(chan struct{})}
		s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1", Now: time.Now,
			Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return st, nil }})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s.Run(ctx)
		seq := uint64(0)
		send := func() {
			seq++
			end := time.Now().Truncate(time.Second)
			rep := &report.Report{Source: report.Source{Service: "shop", Instance: "a"}, Seq: seq, Start: end.Add(-time.Second), End: end,
				Rows: []report.Row{{Tenant: "acme", Route: "GET /a", Kind: report.KindRequest, Count: 1, Duration: time.Millisecond}}}
			if _, err := s.Consume(ctx, rep, nil); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(1500 * time.Millisecond)
		send() // minute 0
		<-st.started
		// Fake time from here: the bubble's clock moves only while every
		// goroutine waits, so each Sleep lands exactly where it says.
		held := time.Now() // minute 0's turn plus the grace: 00:01:10
		time.Sleep(time.Minute - time.Duration(held.Second())*time.Second)
		send() // 00:02:00: a report of minute 1
		time.Sleep(time.Minute)
		send()                      // minute 2
		time.Sleep(2 * time.Second) // two more ticks
		synctest.Wait()
		if n := testutil.ToFloat64(s.met.openMinutes); n != 3 {
			t.Errorf("%v open windows counted %v after the write was held, want 3 (the tick went on)", n, time.Since(held))
		}
		close(st.release)
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		per := map[time.Time]uint64{}
		for _, r := range st.rollups {
			per[r.Minute] += r.Count
		}
		if len(per) != 3 {
			t.Errorf("minutes in the store %v, want 3 with one request each", per)
		}
		for m, n := range per {
			if n != 1 {
				t.Errorf("minute %v: %d requests, want 1", m, n)
			}
		}
	})
}
