package collector

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/qtop-dev/qtop/report"
)

// Source admission. A process that reports for the first time is on
// probation: it is served, but it holds one of a bounded ring of
// probation places, the oldest of which a newer stranger takes. It is
// established — kept until idle, never evicted — once promoteAfter of its
// reports were accepted over more than one second, while fewer than
// Config.MaxSources sources are established. So a flood of junk sources
// (one report each, from addresses or names made up) only ever evicts
// other newcomers: real processes stay, and a new real process is served
// from its first report and established from its third.
const promoteAfter = 3

// intake is the collector's front door for reports: it bounds the
// reports decoded at once and the memory they may take (door.go), holds
// back the answers to junk (hold), makes every string of a report clean
// (screen.go), keeps decoded reports for reuse, and keeps the table of
// reporting processes — their admission bucket, the duplicate filter and
// probation. Its channels and semaphore need no lock; sources and admit
// are under Server.mu (with the open minutes the reports go to).
type intake struct {
	maxSources   int           // Config.MaxSources
	refusalDelay time.Duration // Config.RefusalDelay
	guard        *guardMetrics
	invalidTags  prometheus.Counter
	done         <-chan struct{}     // closed when the server stops: held refusals end
	inflight     chan struct{}       // bounds reports decoded at once
	held         chan struct{}       // bounds refusals held back (screen.go)
	reports      chan *decoded       // decoded reports kept for reuse
	decode       *semaphore.Weighted // bytes of memory decodes may take at once
	sources      map[string]*source
	admit        admission
	erased       *erasedBook // erased.go: tenants whose earlier rows are dropped
	gated        *sync.Map   // service → when a gate of it last reported (UnixNano): gatedNow
}

func newIntake(cfg Config) intake {
	return intake{
		maxSources:   cfg.MaxSources,
		refusalDelay: cfg.RefusalDelay,
		inflight:     make(chan struct{}, decodeSlots),
		held:         make(chan struct{}, maxHeldRefusals),
		reports:      make(chan *decoded, pooledReports),
		decode:       semaphore.NewWeighted(decodeMemory),
		sources:      make(map[string]*source),
		gated:        new(sync.Map),
	}
}

// admission is the probation ring of the source table.
type admission struct {
	ring        []*source // probationary sources in order of arrival (circular)
	head        int
	established int
}

func (in *intake) probationCap() int { return max(in.maxSources/10, 16) }

// source returns the source of key, admitting a new one on probation.
func (in *intake) source(key string, now time.Time) *source {
	if src := in.sources[key]; src != nil {
		return src
	}
	src := &source{key: strings.Clone(key), first: now.Unix()}
	a := &in.admit
	if n := in.probationCap(); len(a.ring) < n {
		a.ring = append(a.ring, src)
	} else {
		old := a.ring[a.head]
		if !old.est && in.sources[old.key] == old {
			delete(in.sources, old.key)
			in.guard.sourcesEvicted.Inc()
		}
		a.ring[a.head] = src
		a.head = (a.head + 1) % n
	}
	in.sources[src.key] = src
	return src
}

// accepted counts an accepted report of src at now (rep: one that came
// in, whose sections are noted; nil: replayed) and establishes it
// when it has earned it.
func (in *intake) accepted(src *source, rep *report.Report, now time.Time) {
	if rep != nil { // a report that came in, not one replayed from the log
		src.sawSections(rep, now)
		if rep.Source.Kind() == report.SourceGate {
			in.gated.Store(rep.Source.Service, now.UnixNano())
		}
	}
	src.accepted++
	if !src.est && src.accepted >= promoteAfter && now.Unix() > src.first && in.admit.established < in.maxSources {
		src.est = true
		in.admit.established++
	}
}

// active counts the sources that reported within the live window at now.
func (in *intake) active(now time.Time) int {
	n := 0
	for _, src := range in.sources {
		if now.Sub(src.heard) <= rateN*time.Second {
			n++
		}
	}
	return n
}

// prune forgets the sources idle for longer than idle at now.
func (in *intake) prune(now time.Time, idle time.Duration) {
	for k, src := range in.sources {
		if now.Sub(src.last) > idle {
			if src.est {
				in.admit.established--
			}
			delete(in.sources, k)
		}
	}
}

// pend, unpend and isPending track the sequence numbers of a source whose
// report is being logged (outside the merge lock): a retry of one of them
// meanwhile is told to retry, not acknowledged as a duplicate of a report
// that may yet fail to be logged. s.mu is held.
func (src *source) pend(seq uint64) { src.pending = append(src.pending, seq) }

func (src *source) unpend(seq uint64) {
	for i, q := range src.pending {
		if q == seq {
			src.pending = append(src.pending[:i], src.pending[i+1:]...)
			return
		}
	}
}

func (src *source) isPending(seq uint64) bool {
	for _, q := range src.pending {
		if q == seq {
			return true
		}
	}
	return false
}

// unmark forgets seq, whose report was not logged.
func (src *source) unmark(seq uint64) {
	if src.any && src.max-seq < seqWindow {
		src.seen[(seq%seqWindow)/64] &^= 1 << (seq % 64)
	}
}

// decoded is a report decoded for the merge, kept for reuse, with what
// prepare makes of it before any lock is taken.
type decoded struct {
	rep   report.Report
	order shardOrder    // the rows by aggregator shard
	svc   svcSums       // the report's request rows, summed for its service
	age   time.Duration // how long it waited at its reporter (report.AgeHeader); 0 in process
}

// svcSums is what a report's request rows add to its service's live view.
type svcSums struct {
	reqRows  int
	req, err uint64
	lat      sparse
}

// prepare makes the rows' shard order and the service sums — all of the
// merge that needs no shared state, so it runs on as many cores as there
// are requests.
func (d *decoded) prepare(g *aggregator) {
	sv := &d.svc
	sv.reqRows, sv.req, sv.err = 0, 0, 0
	sv.lat.Reset()
	for i := range d.rep.Rows {
		if row := &d.rep.Rows[i]; row.Kind == report.KindRequest {
			sv.reqRows++
			sv.req += row.Count
			sv.err += row.Errors
			sv.lat.Merge(&row.Latency)
		}
	}
	d.order.sort(g, d.rep.Rows)
}

// gatedWindow is how long after a gate of a service last reported the
// service counts as behind a gate (a gate reports every second by
// default).
const gatedWindow = 10 * time.Second

// gatedNow says whether a gate of service reported within gatedWindow of
// now: the OTLP receiver then does not count the service's SERVER spans
// as requests, which its gate counted (otlpin.WithGated). It takes no
// lock.
func (in *intake) gatedNow(service string, now time.Time) bool {
	v, ok := in.gated.Load(service)
	return ok && now.UnixNano()-v.(int64) <= int64(gatedWindow)
}
