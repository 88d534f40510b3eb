package enforcesim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/hotkey"
)

// StormConfig is the hot-key storm: Requests spread evenly over Keys, sent
// by Goroutines at once, over Span of virtual time (each request advances
// the virtual clock by Span/Requests), against a guard with TTL.
type StormConfig struct {
	Requests, Keys, Goroutines int
	Span, TTL                  time.Duration
}

// DefaultStorm is the scenario of the package doc: 1,000,000 requests
// over 10 keys from 64 goroutines in 30 s of virtual time, TTL 3 s.
func DefaultStorm() StormConfig {
	return StormConfig{Requests: 1_000_000, Keys: 10, Goroutines: 64, Span: 30 * time.Second, TTL: 3 * time.Second}
}

// StormRow is the outcome of one defence.
type StormRow struct {
	Mode         string
	Requests     int
	BackendCalls int64
	// PerKeyPerTTL is backend calls per key per TTL window, on average.
	PerKeyPerTTL float64
	// MaxAfterFirst is the most calls one key made in one TTL window after
	// the first window (when the guard detects the hot keys).
	MaxAfterFirst int
}

// Storm runs the storm without a guard, with coalescing only (no key is
// ever hot enough to cache), and with the full guard.
func Storm(c StormConfig) ([]StormRow, error) {
	windows := float64(c.Span) / float64(c.TTL)
	row := func(mode string, calls int64, maxAfter int) StormRow {
		return StormRow{Mode: mode, Requests: c.Requests, BackendCalls: calls, PerKeyPerTTL: float64(calls) / float64(c.Keys) / windows, MaxAfterFirst: maxAfter}
	}
	perWindow := c.Requests / c.Keys / int(max(1, windows))
	rows := []StormRow{row("no guard", int64(c.Requests), perWindow)}
	for _, mode := range []string{"coalescing only", "hot-key guard"} {
		calls, maxAfter, err := storm(c, mode == "hot-key guard")
		if err != nil {
			return nil, err
		}
		rows = append(rows, row(mode, calls, maxAfter))
	}
	return rows, nil
}

func storm(c StormConfig, cache bool) (int64, int, error) {
	var tick atomic.Int64
	step := c.Span / time.Duration(c.Requests)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var calls atomic.Int64
	var mu sync.Mutex
	perWindow := map[[2]int]int{} // (key, window) → calls
	keys := make([]string, c.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("product:%d", i)
	}
	opts := []hotkey.Option{hotkey.WithTTL(c.TTL)}
	if !cache {
		opts = append(opts, hotkey.WithThreshold(1<<30, c.TTL))
	}
	index := map[string]int{}
	for i, k := range keys {
		index[k] = i
	}
	g, err := hotkey.New(func(ctx context.Context, k string) (string, error) {
		calls.Add(1)
		w := int(time.Duration(tick.Load()) * step / c.TTL)
		mu.Lock()
		perWindow[[2]int{index[k], w}]++
		mu.Unlock()
		return "value of " + k, nil
	}, nil, opts...)
	if err != nil {
		return 0, 0, err
	}
	defer g.Shutdown(context.Background())
	var wg sync.WaitGroup
	per := c.Requests / c.Goroutines
	errs := make(chan error, c.Goroutines)
	for w := 0; w < c.Goroutines; w++ {
		n := per
		if w == 0 {
			n += c.Requests - per*c.Goroutines
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; i < n; i++ {
				k := keys[(w+i)%len(keys)]
				t := base.Add(time.Duration(tick.Add(1)) * step)
				if _, err := g.GetAt(ctx, t, k); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	maxAfter := 0
	for kw, n := range perWindow {
		if kw[1] > 0 {
			maxAfter = max(maxAfter, n)
		}
	}
	return calls.Load(), maxAfter, nil
}
