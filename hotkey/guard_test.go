package hotkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type countingBackend struct {
	calls   atomic.Int64
	perKey  sync.Map // key → *atomic.Int64
	release chan struct{}
	fail    atomic.Bool
}

func (b *countingBackend) load(ctx context.Context, key string) (string, error) {
	b.calls.Add(1)
	c, _ := b.perKey.LoadOrStore(key, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	if b.release != nil {
		select {
		case <-b.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if b.fail.Load() {
		return "", errors.New("backend down")
	}
	return "v:" + key, nil
}

var epoch = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return epoch.Add(d) }

type manualClock struct{ n atomic.Int64 }

func (m *manualClock) now() time.Time          { return at(time.Duration(m.n.Load())) }
func (m *manualClock) advance(d time.Duration) { m.n.Add(int64(d)) }

func TestGuardCachesHotKeysOnly(t *testing.T) {
	clk := &manualClock{}
	be := &countingBackend{}
	g, err := New(be.load, nil, WithTTL(3*time.Second), WithThreshold(3, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(context.Background())
	ctx := context.Background()
	get := func(k string) {
		t.Helper()
		v, err := g.GetAt(ctx, clk.now(), k)
		if err != nil || v != "v:"+k {
			t.Fatalf("GetAt(%s) = %q, %v", k, v, err)
		}
	}
	// Three misses make "hot" hot; its third load is cached.
	for i := 0; i < 3; i++ {
		get("hot")
	}
	if be.calls.Load() != 3 {
		t.Fatalf("calls %d", be.calls.Load())
	}
	for i := 0; i < 1000; i++ {
		get("hot")
	}
	if be.calls.Load() != 3 {
		t.Errorf("hot key reloaded within its TTL: %d calls", be.calls.Load())
	}
	// A cold key is never cached.
	get("cold")
	clk.advance(3500 * time.Millisecond)
	get("cold")
	if be.calls.Load() != 5 {
		t.Errorf("calls %d, want 5", be.calls.Load())
	}
	// TTL over: the hot key, hit while cached, is loaded once and cached again.
	for i := 0; i < 100; i++ {
		get("hot")
	}
	if be.calls.Load() != 6 {
		t.Errorf("after TTL: %d calls, want 6", be.calls.Load())
	}
	st := g.Stats()
	if st.Entries != 1 || st.Cached != 1 || st.Loads != 6 {
		t.Errorf("stats %+v", st)
	}
	g.Invalidate("hot")
	g.Invalidate("absent")
	get("hot")
	if be.calls.Load() != 7 {
		t.Errorf("after invalidate: %d calls", be.calls.Load())
	}
	if top := g.Hot(1); len(top) != 1 || top[0].Key != "hot" {
		t.Errorf("Hot = %+v", top)
	}
}

// TestGuardClockBackwards: a guard given an earlier time than before
// keeps serving what it cached (its expiry is still ahead) and starts a
// fresh detection window rather than trusting the old one.
func TestGuardClockBackwards(t *testing.T) {
	be := &countingBackend{}
	g, _ := New(be.load, nil, WithTTL(3*time.Second), WithThreshold(2, 3*time.Second))
	defer g.Shutdown(context.Background())
	ctx := context.Background()
	t5 := at(5 * time.Second)
	for i := 0; i < 2; i++ {
		_, _ = g.GetAt(ctx, t5, "k")
	}
	if _, err := g.GetAt(ctx, at(4*time.Second), "k"); err != nil || be.calls.Load() != 2 {
		t.Fatalf("one second back: %v, %d calls (want the cached value, 2)", err, be.calls.Load())
	}
	// Far back: the detection window restarts, one miss is not hot.
	_, _ = g.GetAt(ctx, at(-time.Hour), "cold")
	_, _ = g.GetAt(ctx, at(-time.Hour), "cold2")
	if n := g.Stats().Entries; n != 1 {
		t.Errorf("%d entries, want only k", n)
	}
}

func TestGuardHotShare(t *testing.T) {
	be := &countingBackend{}
	g, _ := New(be.load, nil, WithThreshold(2, time.Minute), WithShare(0.05))
	defer g.Shutdown(context.Background())
	ctx := context.Background()
	// 100 keys missed 3 times each: above the count threshold, each only
	// 1% of the misses: none is hot.
	for r := 0; r < 3; r++ {
		for k := 0; k < 100; k++ {
			_, _ = g.Get(ctx, strconv.Itoa(k))
		}
	}
	if n := g.Stats().Entries; n != 0 {
		t.Errorf("%d keys cached from a uniform spread", n)
	}
	// One key takes 20% of the misses: hot.
	for i := 0; i < 100; i++ {
		_, _ = g.Get(ctx, "hot")
	}
	if n := g.Stats().Entries; n != 1 {
		t.Errorf("%d entries, want the hot key", n)
	}
}

func TestGuardErrorsNotCached(t *testing.T) {
	be := &countingBackend{}
	be.fail.Store(true)
	g, _ := New(be.load, nil, WithThreshold(1, time.Minute))
	defer g.Shutdown(context.Background())
	for i := 0; i < 3; i++ {
		if _, err := g.Get(context.Background(), "k"); err == nil {
			t.Fatal("error lost")
		}
	}
	if be.calls.Load() != 3 {
		t.Errorf("errors cached: %d calls", be.calls.Load())
	}
}

func TestGuardCoalescesAndWaitersLeave(t *testing.T) {
	synctest.Test(t, testGuardCoalescesAndWaitersLeave)
}

func testGuardCoalescesAndWaitersLeave(t *testing.T) {
	be := &countingBackend{release: make(chan struct{})}
	g, _ := New(be.load, nil)
	defer g.Shutdown(context.Background())
	const n = 20
	var wg sync.WaitGroup
	results := make(chan error, n)
	leaverCtx, leave := context.WithCancel(context.Background())
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i == 0 {
				ctx = leaverCtx // the first caller may well be the leader
			}
			v, err := g.Get(ctx, "k")
			if err == nil && v != "v:k" {
				err = fmt.Errorf("value %q", v)
			}
			results <- err
		}()
	}
	synctest.Wait() // every caller is waiting for the one load
	if m := g.Stats().Misses; m != n {
		t.Fatalf("%d misses, want %d", m, n)
	}
	leave()
	// The leaver returns without waiting for the load.
	if err := <-results; !errors.Is(err, context.Canceled) {
		t.Fatalf("first result %v, want the leaver's context.Canceled", err)
	}
	close(be.release)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
	if be.calls.Load() != 1 {
		t.Errorf("%d backend calls, want 1", be.calls.Load())
	}
	if st := g.Stats(); st.Left != 1 || st.Coalesced != n-1 {
		t.Errorf("stats %+v", st)
	}
}

func TestGuardPanicReachesEveryWaiter(t *testing.T) {
	synctest.Test(t, testGuardPanicReachesEveryWaiter)
}

func testGuardPanicReachesEveryWaiter(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int64
	g, _ := New(func(ctx context.Context, k int) (int, error) {
		started.Add(1)
		<-release
		panic("boom")
	}, strconv.Itoa)
	defer g.Shutdown(context.Background())
	const n = 5
	var wg sync.WaitGroup
	var panicked atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					if pe, ok := r.(*PanicError); ok && pe.Value == "boom" && len(pe.Stack) > 0 {
						panicked.Add(1)
					}
				}
			}()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, _ = g.Get(ctx, 7)
		}()
	}
	synctest.Wait() // every caller is waiting for the one load
	if m := g.Stats().Misses; m != n {
		t.Fatalf("%d misses, want %d", m, n)
	}
	close(release)
	wg.Wait()
	if panicked.Load() != n || started.Load() != 1 {
		t.Errorf("%d of %d waiters saw the panic, %d loads", panicked.Load(), n, started.Load())
	}
	if g.Stats().Panics != 1 {
		t.Error("panic not counted")
	}
}

func TestGuardShutdownCancelsLoads(t *testing.T) { synctest.Test(t, testGuardShutdownCancelsLoads) }

func testGuardShutdownCancelsLoads(t *testing.T) {
	be := &countingBackend{release: make(chan struct{})}
	g, _ := New(be.load, nil)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := g.Get(ctx, "k")
		errc <- err
	}()
	synctest.Wait() // the load has started
	if l := g.Stats().Loads; l != 1 {
		t.Fatalf("%d loads, want 1", l)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("load under the guard's context: %v", err)
	}
	if _, err := g.Get(context.Background(), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("after shutdown: %v", err)
	}
}

func TestGuardConfigErrors(t *testing.T) {
	be := &countingBackend{}
	if _, err := New[string, string](nil, nil); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
	for _, o := range []Option{WithShare(1), WithShare(-0.1), WithTTL(-1), WithThreshold(0, time.Second), WithCacheSize(0), WithLoadTimeout(-1)} {
		if _, err := New(be.load, nil, o); !errors.Is(err, ErrConfig) {
			t.Error(err)
		}
	}
}

func TestGuardStormConcurrent(t *testing.T) {
	clk := &manualClock{}
	be := &countingBackend{}
	g, _ := New(be.load, nil, WithCacheSize(4))
	defer g.Shutdown(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := strconv.Itoa((w + i) % 10)
				ctx := context.Background()
				var cancel context.CancelFunc = func() {}
				if i%7 == 0 {
					ctx, cancel = context.WithCancel(ctx)
				}
				v, err := g.GetAt(ctx, clk.now(), k)
				cancel()
				if err != nil || v != "v:"+k {
					t.Errorf("Get(%s) = %q, %v", k, v, err)
					return
				}
				if i%500 == 0 {
					clk.advance(time.Second)
					g.Invalidate(k)
				}
			}
		}()
	}
	wg.Wait()
	if g.Stats().Entries > 4 {
		t.Errorf("%d entries, cache size 4", g.Stats().Entries)
	}
}

func BenchmarkGuard(b *testing.B) {
	g, _ := New(func(ctx context.Context, k string) (string, error) { return k, nil }, nil, WithThreshold(1, time.Hour), WithTTL(time.Hour))
	defer g.Shutdown(context.Background())
	ctx := context.Background()
	now := time.Now()
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	for _, k := range keys {
		g.GetAt(ctx, now, k)
	}
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			g.GetAt(ctx, now, keys[i&7])
		}
	})
	b.Run("hit-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				g.GetAt(ctx, now, keys[i&7])
				i++
			}
		})
	})
	cold, _ := New(func(ctx context.Context, k string) (string, error) { return k, nil }, nil, WithThreshold(1<<30, time.Hour))
	defer cold.Shutdown(context.Background())
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			cold.GetAt(ctx, now, keys[i&7])
		}
	})
}

func TestGuardMetrics(t *testing.T) {
	be := &countingBackend{}
	g, _ := New(be.load, nil, WithThreshold(1, time.Minute))
	defer g.Shutdown(context.Background())
	for i := 0; i < 3; i++ {
		_, _ = g.Get(context.Background(), "k")
	}
	reg := prometheus.NewPedanticRegistry()
	if err := NewMetrics(reg, "products", g); err != nil {
		t.Fatal(err)
	}
	if err := NewMetrics(reg, "products", g); err == nil {
		t.Error("registered twice")
	}
	if err := NewMetrics(nil, "x", g); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
	want := `
# HELP qtop_enforce_hotkey_loads_total Loads sent to the backend.
# TYPE qtop_enforce_hotkey_loads_total counter
qtop_enforce_hotkey_loads_total{guard="products"} 1
# HELP qtop_enforce_hotkey_entries Hot keys in the cache now.
# TYPE qtop_enforce_hotkey_entries gauge
qtop_enforce_hotkey_entries{guard="products"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_enforce_hotkey_loads_total", "qtop_enforce_hotkey_entries"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
