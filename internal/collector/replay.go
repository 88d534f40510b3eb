package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/qtop-dev/qtop/internal/otlpin"
)

// bootState is the replay of the write-ahead log at a start with
// Config.ListenFirst: the collector listens first, so that a liveness
// probe finds it alive through a long replay (76,000 reports took 40 s on
// a busy 2-core machine, past a probe's usual 30 s), and until the replay
// is done every door but /healthz, /readyz and /metrics answers 503 with
// Retry-After, and every gRPC call Unavailable: reporting processes,
// exporters and gateways keep what they send and send it again.
type bootState struct {
	pending atomic.Bool  // the log is not replayed yet
	reports atomic.Int64 // reports replayed so far
	minute  atomic.Int64 // the minute being replayed (unix seconds)
	hook    func(int64)  // tests: after each report replayed
}

// errReplayStopped: the context ended during the replay.
var errReplayStopped = errors.New("collector: stopped while replaying the write-ahead log")

// replayRetry is the Retry-After of a door refused during the replay.
const replayRetry = 5 * time.Second

// status says where the replay is, for /readyz and the doors' 503.
func (b *bootState) status() string {
	msg := fmt.Sprintf("the collector is replaying its write-ahead log after a restart (%d reports so far", b.reports.Load())
	if m := b.minute.Load(); m != 0 {
		msg += ", minute " + time.Unix(m, 0).UTC().Format("15:04")
	}
	return msg + "); try again in a few seconds"
}

// gate answers 503 for every path but the probes and /metrics while the
// log is replayed, and hands the request to next once it is. OTLP/HTTP
// exports pass too: the receiver checks their credential, then refuses
// them before reading the body (its admission, newOTLPPart), as over gRPC.
func (b *bootState) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.pending.Load() {
			switch r.URL.Path {
			case "/healthz", "/readyz", "/metrics", otlpin.PathTraces:
			default:
				writeError(w, http.StatusServiceUnavailable, b.status(), replayRetry)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// grpcGate refuses a rate-limit call while the log is replayed, with
// Unavailable and where the replay is: the service's admission check
// (RLSDeps.Admit), after the credential and before the call is read, as
// OTLP's admission refuses exports.
func (b *bootState) grpcGate() error {
	if b.pending.Load() {
		return status.Error(codes.Unavailable, b.status())
	}
	return nil
}

// replay merges the reports of the write-ahead log into their minutes, so
// that minutes a killed collector had not finished are emitted again in
// full. A logged report that cannot be decoded or is a duplicate is
// skipped. If ctx ends first it returns errReplayStopped and the log stays
// as it was, to be replayed in full at the next start (Shutdown then
// writes no minute).
func (s *Server) replay(ctx context.Context) error {
	r := replayer{s: s, now: s.cfg.Now()}
	err := s.minutes.replay(func(m *minute, read func(func([]byte) error) error) (int, error) {
		return r.minute(ctx, m, read)
	})
	if err == nil {
		s.boot.pending.Store(false)
	}
	return err
}

// replayer merges the logged reports into their minutes at now.
type replayer struct {
	s   *Server
	now time.Time
}

// minute merges m's logged reports on one worker per core, as
// reports that come in merge side by side (the rows in their shards, the
// rest under mu): a minute of 90,000 reports is tens of seconds of one
// core. The order of a process's reports does not matter (the duplicate
// filter keeps a window). It returns how many it merged.
func (r replayer) minute(ctx context.Context, m *minute, read func(func([]byte) error) error) (int, error) {
	workers := runtime.GOMAXPROCS(0)
	work := make(chan []byte, 4*workers)
	free := make(chan []byte, 8*workers) // bodies' buffers, used again
	var merged atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := new(decoded)
			for body := range work {
				if ctx.Err() == nil && r.one(d, m, body) {
					merged.Add(1)
				}
				select {
				case free <- body[:0]:
				default:
				}
			}
		}()
	}
	err := read(func(body []byte) error {
		if ctx.Err() != nil {
			return errReplayStopped
		}
		var b []byte
		select {
		case b = <-free:
		default:
		}
		work <- append(b, body...) // read reuses body
		return nil
	})
	close(work)
	wg.Wait()
	if err == nil && ctx.Err() != nil {
		err = errReplayStopped // the workers left the rest of the minute
	}
	return int(merged.Load()), err
}

// one merges one logged report into m, with d as its scratch; it says
// false for a report that cannot be decoded or is a duplicate.
func (r replayer) one(d *decoded, m *minute, body []byte) bool {
	s, now := r.s, r.now
	s.boot.minute.Store(m.start.Unix())
	rep := &d.rep
	if err := reports.DecodeInto(rep, body); err != nil {
		s.log.Warn("wal: undecodable report skipped", "minute", m.start, "err", err)
		return false
	}
	// Under mu, as for a report that comes in (with Config.ListenFirst
	// /metrics reads the live view meanwhile): the screen, the source and
	// the duplicate filter, the features' and the live view's merges.
	s.mu.Lock()
	s.in.screen(rep)
	src := s.in.source(sourceKey(rep.Source), now)
	if src.last.IsZero() {
		src.last = now // and its bucket full, as a new one is
	}
	if src.check(rep.Seq) == seqDup {
		s.mu.Unlock()
		return false
	}
	src.mark(rep.Seq)
	s.in.accepted(src, nil, now)
	d.prepare(s.agg)
	s.feat.merge(rep, now, false)
	s.view.merge(d, m, now, false)
	s.mu.Unlock()
	s.agg.merge(rep, &d.order, m, now, false)
	n := s.boot.reports.Add(1)
	if n%100_000 == 0 {
		s.log.Info("wal: replaying", "minute", m.start, "reports", n)
	}
	if s.boot.hook != nil {
		s.boot.hook(n)
	}
	return true
}
