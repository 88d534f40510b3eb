package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/store"
)

// ErrNoAudit: the store cannot read its audit back (or there is none).
var ErrNoAudit = errors.New("collector: the store cannot read the audit")

// ReadAudit returns the policy changes of [from, to) from st, oldest
// first, as GET /v1/audit and `collector audit` show them.
func ReadAudit(ctx context.Context, st store.Store, from, to time.Time) ([]api.AuditRow, error) {
	ar, ok := st.(store.AuditReader)
	if st == nil || !ok {
		return nil, ErrNoAudit
	}
	if !from.Before(to) {
		return nil, fmt.Errorf("%w: from %v is not before to %v", ErrReport, from.UTC(), to.UTC())
	}
	as, err := ar.ReadAudit(ctx, from, to)
	if err != nil {
		return nil, fmt.Errorf("collector: audit: %w", err)
	}
	out := make([]api.AuditRow, 0, len(as))
	for _, a := range as {
		rule := json.RawMessage(a.Rule)
		if !json.Valid(rule) {
			rule, _ = json.Marshal(a.Rule)
		}
		out = append(out, api.AuditRow{Time: a.Time, Who: a.Who, Action: a.Action, PolicyVersion: a.PolicyVersion, Rule: rule})
	}
	return out, nil
}

// handleAudit is GET /v1/audit?from=…&to=… (admin); from defaults to 7d,
// to to now, as cost reports spell them.
func (s httpAPI) handleAudit(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "use GET", 0)
		return
	}
	q := r.URL.Query()
	now := s.cfg.Now()
	from, to := q.Get("from"), q.Get("to")
	if from == "" {
		from = "7d"
	}
	if to == "" {
		to = "now"
	}
	f, err := ParseTime(from, now)
	if err == nil {
		var t time.Time
		if t, err = ParseTime(to, now); err == nil {
			var rows []api.AuditRow
			if rows, err = ReadAudit(r.Context(), s.em.store, f, t); err == nil {
				writeJSON(w, http.StatusOK, rows)
				return
			}
		}
	}
	switch {
	case errors.Is(err, ErrReport):
		writeError(w, http.StatusBadRequest, err.Error(), 0)
	case errors.Is(err, ErrNoAudit):
		writeError(w, http.StatusServiceUnavailable, err.Error(), 0)
	default:
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
	}
}
