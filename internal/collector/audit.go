package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/store"
)

// ErrNoAudit: the store cannot read its audit back (or there is none).
var ErrNoAudit = errors.New("collector: the store cannot read the audit")

// ErrAudit: an audit request is invalid.
var ErrAudit = errors.New("collector: invalid audit request")

// Bounds of GET /v1/audit's limit: the newest rows it returns.
const (
	defaultAuditLimit = 1000
	maxAuditLimit     = store.MaxAuditRows
)

// AuditTruncatedHeader is set on a GET /v1/audit answer that left rows
// out (more than its limit in the range): how many it shows of how many.
const AuditTruncatedHeader = "X-Qtop-Audit-Truncated"

// ReadAudit returns the policy changes of [from, to) from st, oldest
// first, as GET /v1/audit and `collector audit` show them.
func ReadAudit(ctx context.Context, st store.Store, from, to time.Time) ([]api.AuditRow, error) {
	ar, ok := st.(store.AuditReader)
	if st == nil || !ok {
		return nil, ErrNoAudit
	}
	if !from.Before(to) {
		return nil, fmt.Errorf("%w: from %s is not before to %s", ErrAudit, from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
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

// handleAudit is GET /v1/audit?from=…&to=…&limit=… (admin); from
// defaults to 7d, to to now, as cost reports spell them; limit (default
// 1000, at most 10000) keeps the newest rows, and AuditTruncatedHeader
// says when it left some out.
func (s httpAPI) handleAudit(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	q := r.URL.Query()
	now := s.cfg.Now()
	limit := defaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%v: limit %q: want a number 1…%d", ErrAudit, clip(v), maxAuditLimit), 0)
			return
		}
		limit = n
	}
	from, to := q.Get("from"), q.Get("to")
	if from == "" {
		from = "7d"
	}
	if to == "" {
		to = "now"
	}
	f, err := auditTime("from", from, now)
	if err == nil {
		var t time.Time
		if t, err = auditTime("to", to, now); err == nil {
			var rows []api.AuditRow
			if rows, err = ReadAudit(r.Context(), s.em.store, f, t); err == nil {
				if n := len(rows); n > limit {
					of := strconv.Itoa(n)
					if n >= store.MaxAuditRows {
						of = "at least " + of
					}
					w.Header().Set(AuditTruncatedHeader, fmt.Sprintf("newest %d of %s rows shown; narrow from and to, or raise limit (at most %d)", limit, of, maxAuditLimit))
					rows = rows[n-limit:]
				}
				writeJSON(w, http.StatusOK, rows)
				return
			}
		}
	}
	switch {
	case errors.Is(err, ErrAudit):
		writeError(w, http.StatusBadRequest, err.Error(), 0)
	case errors.Is(err, ErrNoAudit):
		writeError(w, http.StatusServiceUnavailable, err.Error(), 0)
	default:
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
	}
}

// auditTime reads the bound name of an audit request as ParseTime does,
// its error an ErrAudit.
func auditTime(name, v string, now time.Time) (time.Time, error) {
	t, err := ParseTime(v, now)
	if err != nil {
		return t, fmt.Errorf("%w: %s: %s", ErrAudit, name, strings.TrimPrefix(err.Error(), ErrReport.Error()+": "))
	}
	return t, nil
}
