package bench

// Hot-key caching and coalescing side by side: qtop's hotkey.Guard
// against github.com/maypok86/otter/v2 v2.4.0 (a cache hit) and
// golang.org/x/sync/singleflight (a coalesced load). Eight hot string
// keys; the time is passed in to Guard.GetAt (otter reads its own clock).
// Run: ./run -bench HotKey
//
// BenchmarkHotKey/hit/*     a cache hit, serial and with GOMAXPROCS goroutines
// BenchmarkHotKey/miss/*    a miss whose load returns at once: the overhead of
//                           coalescing beyond the load itself

import (
	"context"
	"testing"
	"time"

	"github.com/maypok86/otter/v2"
	"golang.org/x/sync/singleflight"

	"github.com/qtop-dev/qtop/hotkey"
)

var hotKeys = []string{"product:0", "product:1", "product:2", "product:3", "product:4", "product:5", "product:6", "product:7"}

func hotLoad(_ context.Context, k string) (string, error) { return k, nil }

func BenchmarkHotKey(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	g, err := hotkey.New(hotLoad, nil, hotkey.WithTTL(time.Hour), hotkey.WithThreshold(1, time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	defer g.Shutdown(ctx)
	for _, k := range hotKeys {
		_, _ = g.GetAt(ctx, now, k)
	}
	oc := otter.Must(&otter.Options[string, string]{MaximumSize: 1024, ExpiryCalculator: otter.ExpiryWriting[string, string](time.Hour)})
	for _, k := range hotKeys {
		oc.Set(k, k)
	}
	b.Run("hit/qtop-Guard-GetAt", func(b *testing.B) {
		serialParallel(b, hotKeys, func(_ int, k string) { _, _ = g.GetAt(ctx, now, k) })
	})
	b.Run("hit/otter-GetIfPresent", func(b *testing.B) {
		serialParallel(b, hotKeys, func(_ int, k string) { _, _ = oc.GetIfPresent(k) })
	})
	cold, _ := hotkey.New(hotLoad, nil, hotkey.WithThreshold(1<<30, time.Hour))
	defer cold.Shutdown(ctx)
	b.Run("miss/qtop-Guard-GetAt", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _ = cold.GetAt(ctx, now, hotKeys[i&7])
		}
	})
	b.Run("miss/qtop-Guard-GetAt-cancellable-ctx", func(b *testing.B) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _ = cold.GetAt(cctx, now, hotKeys[i&7])
		}
	})
	var sf singleflight.Group
	b.Run("miss/singleflight-Do", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k := hotKeys[i&7]
			_, _, _ = sf.Do(k, func() (any, error) { return hotLoad(ctx, k) })
		}
	})
	b.Run("miss/bare-load", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _ = hotLoad(ctx, hotKeys[i&7])
		}
	})
}
