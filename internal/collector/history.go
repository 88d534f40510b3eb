package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// storeReadRetry is the Retry-After of a history or a cost report the
// store cannot answer whole yet (rows of its minutes spooled, a shard
// down).
const storeReadRetry = 30 * time.Second

// storeReadIncomplete reports whether err says the store cannot answer a
// read whole now: minutes of the range wait in the spool, or the store (a
// shard of it) is down. The history and the cost report answer it 503
// with storeReadRetry: an answer now would leave rows out.
func storeReadIncomplete(err error) bool {
	return errors.Is(err, store.ErrSpooled) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, errStoreNotOpen)
}

// ErrHistory: a history request is not one the collector can answer.
var ErrHistory = errors.New("collector: bad history request")

// ErrNoStore: the collector runs without a store (--store none), so it
// keeps no history and makes no cost reports.
var ErrNoStore = errors.New("collector: this collector runs without a store (--store none): it keeps no history and makes no cost reports; run it with --store duckdb://FILE or clickhouse://HOST:9000/DB")

// History returns tenant's load per minute over the last minutes before
// now, from the store (the qtop drill-in's history beyond the live 120 s).
// The tenant is named as load enters qtop: "other" is the tenant of that
// name, stored under its stand-in (tenant.Escape), as in a cost report,
// a rule or an erasure, never the overflow row; the history says the
// name it is stored under.
func (s *Server) History(ctx context.Context, name string, minutes int, now time.Time) (api.History, error) {
	if err := tenant.ValidateTenant(name); err != nil && name != report.UnknownTenant {
		return api.History{}, fmt.Errorf("%w: %w", ErrHistory, err)
	}
	name = tenant.Escape(name)
	if minutes < 1 || minutes > api.MaxHistoryMinutes {
		return api.History{}, fmt.Errorf("%w: minutes %d: want 1…%d", ErrHistory, minutes, api.MaxHistoryMinutes)
	}
	if s.em.store == nil {
		return api.History{}, ErrNoStore
	}
	to := now.UTC().Truncate(time.Minute).Add(time.Minute)
	from := to.Add(-time.Duration(minutes) * time.Minute)
	rows, err := s.em.store.History(ctx, name, from, to)
	if err != nil {
		return api.History{}, fmt.Errorf("collector: history of %s: %w", name, err)
	}
	h := api.History{Tenant: name, From: from, To: to, Points: make([]api.HistoryPoint, 0, len(rows))}
	for _, r := range rows {
		h.Points = append(h.Points, api.HistoryPoint{
			Minute: r.Minute.UTC(),
			// DB load: the minute's database time per second — the
			// statements' time, and what the pg sampler's sessions held
			// beyond it — as the live view and the cost report count it.
			DBLoad:    max(r.DurationSeconds, 0) / 60,
			RUPerSec:  r.RU / 60,
			ReqPerSec: float64(r.Count) / 60,
			ErrPerSec: float64(r.Errors) / 60,
			// The store's History keeps the latency of requests and
			// jobs only (a statement's is not the tenant's latency).
			P95Seconds: r.Latency.Quantile(0.95),
		})
	}
	return h, nil
}

func (s httpAPI) handleHistory(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	q, err := strictQuery(r.URL.RawQuery, []string{"tenant", "minutes"})
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	minutes := api.MaxHistoryMinutes
	if m := q.Get("minutes"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("minutes %q: want a number 1…%d", clip(m), api.MaxHistoryMinutes), 0)
			return
		}
		minutes = n
	}
	h, err := s.History(r.Context(), q.Get("tenant"), minutes, s.cfg.Now())
	if err != nil {
		status, retry := http.StatusInternalServerError, time.Duration(0)
		switch {
		case errors.Is(err, ErrHistory):
			status = http.StatusBadRequest
		case errors.Is(err, ErrNoStore):
			status = http.StatusServiceUnavailable
		case storeReadIncomplete(err):
			status, retry = http.StatusServiceUnavailable, storeReadRetry
		}
		writeError(w, status, err.Error(), retry)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(h)
}
