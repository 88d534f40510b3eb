package pgactivity

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkSample reads pg_stat_activity with 50 tagged sessions running
// (10 tenants, 5 sessions each): one op is one Sample, parse included.
func BenchmarkSample(b *testing.B) {
	const sessions = 50
	pool := newPool(b, "", "")
	ctx, stop := context.WithCancel(context.Background())
	var ss []*session
	for i := range sessions {
		s := connect(b)
		s.start(ctx, tagged("SELECT pg_sleep(600)", fmt.Sprintf("bench-%d", i%10), "GET /bench"))
		ss = append(ss, s)
	}
	defer func() {
		stop()
		for _, s := range ss {
			s.wait(b)
		}
	}()
	smp := NewSampler(pool)
	waitFor(b, smp, "every session active", func(s Snapshot) bool {
		n := 0
		for _, bk := range s.Backends {
			if bk.Active() && bk.Route == "GET /bench" {
				n++
			}
		}
		return n >= sessions
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		snap, err := smp.Sample(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Backends) < sessions {
			b.Fatalf("%d backends", len(snap.Backends))
		}
	}
}

// BenchmarkParseAggregate is the sampler's CPU work per sample of 50
// sessions without the round trip: read the tags of every statement and
// add the snapshot to an aggregator (cut every 60 samples, as a
// one-minute window of one-second samples).
func BenchmarkParseAggregate(b *testing.B) {
	const sessions = 50
	raw := make([]Backend, sessions)
	for i := range raw {
		raw[i] = Backend{PID: int32(1000 + i), Database: "app", User: "app", State: StateActive,
			QueryStart: t0, Query: tagged("SELECT * FROM orders WHERE customer_id = $1 AND created_at > $2 ORDER BY created_at DESC LIMIT 50",
				fmt.Sprintf("tenant-%d", i%10), "GET /orders")}
		switch i % 5 {
		case 1:
			raw[i].WaitEventType, raw[i].WaitEvent = "IO", "DataFileRead"
		case 2:
			raw[i].WaitEventType, raw[i].WaitEvent = "Lock", "transactionid"
			raw[i].BlockedBy = []int32{1000}
		}
	}
	agg := NewAggregator()
	bs := make([]Backend, sessions)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		now := t0.Add(time.Duration(n) * time.Second)
		copy(bs, raw)
		for i := range bs {
			bs[i].Duration = now.Sub(bs[i].QueryStart)
			bs[i].setTags()
		}
		agg.Add(Snapshot{Time: now, Backends: bs})
		if n++; n%60 == 0 {
			agg.Cut(now)
		}
	}
}
