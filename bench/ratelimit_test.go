package bench

// Rate limiting side by side: qtop's enforce.Buckets (RU token buckets,
// one atomic instant per tenant, time passed in) against
// golang.org/x/time/rate v0.16.0 and github.com/sethvargo/go-limiter
// v0.7.1 (memorystore). Keyed benchmarks spread calls over 1,000 tenants;
// parallel ones use GOMAXPROCS goroutines on distinct tenants.
// Run: ./run -bench RateLimit
//
// BenchmarkRateLimit/keyed/*      one decision for a tenant looked up by key
// BenchmarkRateLimit/single/*     one decision on one limiter (no lookup)
// BenchmarkRateLimit/enforcer     a whole Enforcer.AdmitAt (shedder + bucket + counters)

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/gcra"
	"github.com/qtop-dev/qtop/tenant"
)

const rlKeys = 1000

func rlKeyNames() []string {
	keys := make([]string, rlKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%04d", i)
	}
	return keys
}

// keyedRate is the usual way to key x/time/rate: a map of limiters behind
// a read-write mutex.
type keyedRate struct {
	mu sync.RWMutex
	m  map[string]*rate.Limiter
}

func (k *keyedRate) get(key string) *rate.Limiter {
	k.mu.RLock()
	l := k.m[key]
	k.mu.RUnlock()
	if l != nil {
		return l
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if l = k.m[key]; l == nil {
		l = rate.NewLimiter(rate.Limit(1e9), 1e9)
		k.m[key] = l
	}
	return l
}

func serialParallel(b *testing.B, keys []string, f func(i int, key string)) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			f(i, keys[i%len(keys)])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var next sync.Mutex
		start := 0
		b.RunParallel(func(pb *testing.PB) {
			next.Lock()
			i := start
			start += len(keys) / 8
			next.Unlock()
			for pb.Next() {
				f(i, keys[i%len(keys)])
				i++
			}
		})
	})
}

func BenchmarkRateLimit(b *testing.B) {
	keys := rlKeyNames()
	now := time.Now()
	// The enforcer's own keyed buckets (every plan at 1e9 RU/s).
	plans := enforce.WithPlans(map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1e9, Burst: 1e9}, Weight: 1}})
	b.Run("keyed/qtop-Buckets-AllowAt", func(b *testing.B) {
		e, err := enforce.New(plans)
		if err != nil {
			b.Fatal(err)
		}
		k := e.Buckets()
		serialParallel(b, keys, func(_ int, key string) { k.AllowAt(now, key) })
	})
	b.Run("keyed/qtop-Buckets-TakeAt", func(b *testing.B) {
		e, _ := enforce.New(plans)
		k := e.Buckets()
		serialParallel(b, keys, func(_ int, key string) { k.TakeAt(now, key, 1) })
	})
	b.Run("keyed/x-time-rate-AllowN-now", func(b *testing.B) {
		k := &keyedRate{m: make(map[string]*rate.Limiter)}
		serialParallel(b, keys, func(_ int, key string) { k.get(key).AllowN(now, 1) })
	})
	b.Run("keyed/x-time-rate-Allow", func(b *testing.B) {
		k := &keyedRate{m: make(map[string]*rate.Limiter)}
		serialParallel(b, keys, func(_ int, key string) { k.get(key).Allow() })
	})
	b.Run("keyed/go-limiter-Take", func(b *testing.B) {
		s, err := memorystore.New(&memorystore.Config{Tokens: 1 << 40, Interval: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(context.Background())
		ctx := context.Background()
		serialParallel(b, keys, func(_ int, key string) { _, _, _, _, _ = s.Take(ctx, key) })
	})
	b.Run("single/qtop-gcra-Atomic-TakeAt", func(b *testing.B) {
		var bk gcra.Atomic
		r, _ := gcra.NewRate(1e9, 1e9)
		b.ReportAllocs()
		for b.Loop() {
			bk.TakeAt(now, r, 1)
		}
	})
	b.Run("single/x-time-rate-AllowN-now", func(b *testing.B) {
		l := rate.NewLimiter(rate.Limit(1e9), 1e9)
		b.ReportAllocs()
		for b.Loop() {
			l.AllowN(now, 1)
		}
	})
	b.Run("enforcer/AdmitAt", func(b *testing.B) {
		e, err := enforce.New(enforce.WithPlans(map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1e9, Burst: 1e9}, Weight: 1}}))
		if err != nil {
			b.Fatal(err)
		}
		tags := make([]tenant.Tags, len(keys))
		for i, k := range keys {
			tags[i] = tenant.Tags{Tenant: k, Tier: tenant.Tier(1 + i%4)}
		}
		serialParallel(b, keys, func(i int, _ string) { e.AdmitAt(now, tags[i%len(tags)]) })
	})
}
