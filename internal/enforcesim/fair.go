package enforcesim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/qtop-dev/qtop/fairqueue"
)

// FairConfig is the shared-worker-pool scenario: one tenant enqueues Big
// jobs at once beside Small tenants that each submit a job every Every,
// on Workers workers that take Service per job.
type FairConfig struct {
	Workers   int
	Service   time.Duration
	Big       int
	Small     int
	SmallJobs int
	Every     time.Duration
}

// DefaultFair is the scenario of the package doc: 2,000 jobs beside ten
// small tenants submitting a job every 200 ms, four workers, 10 ms a job.
func DefaultFair() FairConfig {
	return FairConfig{Workers: 4, Service: 10 * time.Millisecond, Big: 2000, Small: 10, SmallJobs: 50, Every: 200 * time.Millisecond}
}

// Waits summarises queueing delays.
type Waits struct {
	N             int
	P50, P99, Max time.Duration
}

func summarise(d []time.Duration) Waits {
	if len(d) == 0 {
		return Waits{}
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return Waits{N: len(d), P50: q(0.5), P99: q(0.99), Max: d[len(d)-1]}
}

// FairRow is the outcome of one queue discipline.
type FairRow struct {
	Mode       string
	Big, Small Waits
	Makespan   time.Duration
}

type job struct {
	tenant string
	at     time.Duration
}

// Fair runs the scenario with a FIFO queue and with fairqueue.Queue.
func Fair(c FairConfig) ([]FairRow, error) {
	var arrivals []job
	for i := 0; i < c.Big; i++ {
		arrivals = append(arrivals, job{"big", 0})
	}
	for s := 0; s < c.Small; s++ {
		for j := 0; j < c.SmallJobs; j++ {
			// Small tenants are staggered over the period, off the
			// workers' 10 ms rhythm (jobs rarely arrive as a worker frees).
			at := time.Duration(j)*c.Every + time.Duration(s)*c.Every/time.Duration(c.Small) + time.Duration(1+s%7)*time.Millisecond
			arrivals = append(arrivals, job{fmt.Sprintf("small-%02d", s), at})
		}
	}
	slices.SortStableFunc(arrivals, func(a, b job) int { return int(a.at - b.at) })

	var fifo []job
	fifoRow := run(c, arrivals, func(j job) { fifo = append(fifo, j) }, func() (job, bool) {
		if len(fifo) == 0 {
			return job{}, false
		}
		j := fifo[0]
		fifo = fifo[1:]
		return j, true
	})
	fifoRow.Mode = "FIFO"

	q, err := fairqueue.New[job](fairqueue.WithMaxPending(c.Big + c.SmallJobs))
	if err != nil {
		return nil, err
	}
	fairRow := run(c, arrivals, func(j job) { _ = q.PushAt(context.Background(), time.Time{}.Add(j.at), j.tenant, j, 1) }, func() (job, bool) {
		it, ok := q.PopItem()
		return it.Value, ok
	})
	fairRow.Mode = "FairQueue"
	return []FairRow{fifoRow, fairRow}, nil
}

// run is a discrete-event simulation of the worker pool in virtual time.
func run(c FairConfig, arrivals []job, push func(job), pop func() (job, bool)) FairRow {
	free := make([]time.Duration, c.Workers)
	var big, small []time.Duration
	var now, end time.Duration
	next := 0
	done := 0
	for done < len(arrivals) {
		for next < len(arrivals) && arrivals[next].at <= now {
			push(arrivals[next])
			next++
		}
		for w := range free {
			if free[w] > now {
				continue
			}
			j, ok := pop()
			if !ok {
				break
			}
			wait := now - j.at
			if j.tenant == "big" {
				big = append(big, wait)
			} else {
				small = append(small, wait)
			}
			free[w] = now + c.Service
			end = max(end, free[w])
			done++
		}
		// Advance to the next event: an arrival or a worker coming free.
		t := time.Duration(1 << 62)
		if next < len(arrivals) {
			t = arrivals[next].at
		}
		for _, f := range free {
			if f > now && f < t {
				t = f
			}
		}
		if t == 1<<62 {
			break
		}
		now = t
	}
	return FairRow{Big: summarise(big), Small: summarise(small), Makespan: end}
}
