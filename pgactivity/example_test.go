package pgactivity_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/qtop-dev/qtop/pgactivity"
)

// Sample once a second and print each tenant's database load every ten
// seconds. It needs a server, so it is compiled but not run by go test.
func ExampleSampler() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // a role with pg_monitor
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	agg := pgactivity.NewAggregator()
	go func() {
		for now := range time.Tick(10 * time.Second) {
			w := agg.Cut(now)
			for _, l := range w.Tenants {
				fmt.Printf("%-20s AAS %.2f %v longest %v\n", l.Tenant, l.AAS, l.Waits, l.Longest)
			}
			for _, p := range w.Blocked {
				fmt.Printf("%s (pid %d) waits for %s (pid %d)\n", p.Blocked.Tenant, p.Blocked.PID, p.Blocking.Tenant, p.Blocking.PID)
			}
		}
	}()
	pgactivity.NewSampler(pool).Run(ctx, time.Second, func(s pgactivity.Snapshot, err error) {
		if errors.Is(err, pgactivity.ErrInsufficientPrivilege) {
			log.Print(err) // names the missing grant; the snapshot is still usable
		} else if err != nil {
			log.Print(err)
			return
		}
		agg.Add(s)
	})
}

// Two samples of three sessions: acme has two active sessions in both (one
// on CPU, one waiting for a lock held by globex's open transaction), so its
// average active sessions is 2.
func ExampleAggregator() {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	sample := func(sec int) pgactivity.Snapshot {
		now := t0.Add(time.Duration(sec) * time.Second)
		return pgactivity.Snapshot{Time: now, Backends: []pgactivity.Backend{
			{PID: 101, Tenant: "acme", State: pgactivity.StateActive, QueryStart: t0, Duration: now.Sub(t0)},
			{PID: 102, Tenant: "acme", State: pgactivity.StateActive, WaitEventType: "Lock", WaitEvent: "transactionid",
				QueryStart: t0, Duration: now.Sub(t0), BlockedBy: []int32{201}},
			{PID: 201, Tenant: "globex", State: pgactivity.StateIdleInTransaction, WaitEventType: "Client", WaitEvent: "ClientRead"},
		}}
	}
	agg := pgactivity.NewAggregator()
	agg.Add(sample(1))
	agg.Add(sample(2))
	w := agg.Cut(t0.Add(3 * time.Second))

	fmt.Printf("%d samples from %s to %s\n", w.Samples, w.Start.Format("15:04:05"), w.End.Format("15:04:05"))
	for _, l := range w.Tenants {
		fmt.Printf("%s: AAS %.1f (CPU %.1f, Lock %.1f), %d statements, longest %v\n",
			l.Tenant, l.AAS, l.Waits[pgactivity.WaitCPU], l.Waits["Lock"], l.Statements, l.Longest)
	}
	for _, p := range w.Blocked {
		fmt.Printf("blocked: %s pid %d by %s pid %d (%s)\n", p.Blocked.Tenant, p.Blocked.PID, p.Blocking.Tenant, p.Blocking.PID, p.Blocking.State)
	}
	// Output:
	// 2 samples from 09:00:01 to 09:00:03
	// acme: AAS 2.0 (CPU 1.0, Lock 1.0), 2 statements, longest 2s
	// blocked: acme pid 102 by globex pid 201 (idle in transaction)
}
