package collector

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// openMinutes are the minutes a report may still go to, each with its
// write-ahead log (wal.go), and the minutes written for good, which are
// never opened again. Their rows are the aggregator's. Under Server.mu.
type openMinutes struct {
	dir             string // DataDir/wal
	grace, lateKeep time.Duration
	log             *slog.Logger
	retimed         prometheus.Counter // reports counted in the minute they arrived
	byStart         map[int64]*minute
	finalized       map[int64]struct{} // minutes written for good (last 3 h)
	lastFinal       int64
}

func newOpenMinutes(cfg Config, dir string) openMinutes {
	return openMinutes{
		dir: dir, grace: cfg.Grace, lateKeep: cfg.LateKeep, log: cfg.Logger,
		byStart:   make(map[int64]*minute),
		finalized: make(map[int64]struct{}),
	}
}

// place places a report in a minute: the minute of its window's middle,
// unless that is outside what the collector still keeps (older than the
// late-report horizon, or more than a minute in the future: a clock that
// jumped), in which case it counts in the minute it arrived (retimed). A
// minute already written for good is never opened again (that would
// replace its rows with a part of them): should the collector's own clock
// go back, the report counts in the first minute after the last one
// closed.
func (o *openMinutes) place(start, end, now time.Time) (mt time.Time, retimed bool) {
	arrival := now.UTC().Truncate(time.Minute)
	mt, retimed = arrival, true
	if !start.IsZero() && !end.Before(start) {
		mid := start.Add(end.Sub(start) / 2).UTC().Truncate(time.Minute)
		if now.Before(mid.Add(time.Minute+o.grace+o.lateKeep)) && !mid.After(arrival.Add(time.Minute)) {
			mt, retimed = mid, false
		}
	}
	if _, done := o.finalized[mt.Unix()]; done {
		mt, retimed = arrival, true
		if _, done := o.finalized[mt.Unix()]; done {
			mt = time.Unix(o.lastFinal, 0).UTC().Add(time.Minute)
		}
	}
	return mt, retimed
}

// at returns the minute starting at mt, opening it (without its log).
func (o *openMinutes) at(mt time.Time) *minute {
	m := o.byStart[mt.Unix()]
	if m == nil {
		m = newMinute(mt)
		o.byStart[mt.Unix()] = m
	}
	return m
}

// take returns the minute that a report of the window start–end arriving
// at now merges into (place), with its write-ahead log open.
func (o *openMinutes) take(start, end, now time.Time) (*minute, error) {
	mt, retimed := o.place(start, end, now)
	if retimed {
		o.retimed.Inc()
	}
	m := o.at(mt)
	if m.wal == nil {
		var err error
		if m.wal, err = openWAL(o.dir, mt); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// due returns the emissions of every changed minute whose grace has
// passed at now (of all changed minutes when all is set), and drops the
// minutes past the late horizon: their logs, their rows.
func (o *openMinutes) due(now time.Time, all bool, em *emitter) []emission {
	var todo []emission
	for k, m := range o.byStart {
		closeAt := m.start.Add(time.Minute + o.grace)
		if m.dirty.Load() && (all || !now.Before(closeAt)) {
			if em.store == nil {
				m.dirty.Store(false)
			} else {
				todo = append(todo, em.build(m))
			}
		}
		if !m.dirty.Load() && m.merging.Load() == 0 && !now.Before(closeAt.Add(o.lateKeep)) {
			if m.wal != nil {
				if err := m.wal.remove(); err != nil && !errors.Is(err, os.ErrNotExist) {
					o.log.Warn("wal: remove", "err", err)
				}
			}
			delete(o.byStart, k)
			em.agg.dropMinute(m)
			o.finalized[k] = struct{}{}
			o.lastFinal = max(o.lastFinal, k)
		}
	}
	for k := range o.finalized {
		if now.Unix()-k > 3*3600 && k < o.lastFinal {
			delete(o.finalized, k)
		}
	}
	return todo
}

// unwrittenFrom returns the start of the earliest minute that ended by
// now with rows not yet in the store (or its spool): in its grace, or a
// write failed and is tried again (zero: none).
func (o *openMinutes) unwrittenFrom(now time.Time) time.Time {
	var first time.Time
	for _, m := range o.byStart {
		if !m.start.Add(time.Minute).After(now) && (m.dirty.Load() || m.writing.Load() > 0) && (first.IsZero() || m.start.Before(first)) {
			first = m.start
		}
	}
	return first
}

// wals returns the write-ahead logs of the open minutes.
func (o *openMinutes) wals() []*walFile {
	var wals []*walFile
	for _, m := range o.byStart {
		if m.wal != nil {
			wals = append(wals, m.wal)
		}
	}
	return wals
}

// replay reads the write-ahead log of every minute it holds into that
// minute: merge is given the minute and a read that hands each record to
// its fn, and returns how many it merged. So minutes a killed collector
// had not finished are emitted again in full.
func (o *openMinutes) replay(merge func(m *minute, read func(fn func(body []byte) error) error) (int, error)) error {
	mins, err := walMinutes(o.dir)
	if err != nil {
		return err
	}
	for _, mt := range mins {
		m := newMinute(mt)
		var cut int64
		n, err := merge(m, func(fn func(body []byte) error) (err error) {
			cut, err = readWAL(walPath(o.dir, mt), fn)
			return err
		})
		if err != nil {
			return err
		}
		if cut > 0 {
			o.log.Warn("wal: cut a torn record (never acknowledged)", "minute", mt, "bytes", cut)
		}
		if m.wal, err = openWAL(o.dir, mt); err != nil {
			return err
		}
		m.dirty.Store(true)
		o.byStart[mt.Unix()] = m
		o.log.Info("wal: replayed minute", "minute", mt, "reports", n)
	}
	return nil
}
