package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
)

// handlePGSignal serves POST /v1/pg/signal: qtop on a collector cancels a
// statement or terminates a session of the PostgreSQL this collector
// samples, as qtop --postgres does on its own connection — only what was
// shown (pgactivity.CancelStatement, TerminateSession: checked and
// signalled in one statement), with the admin credential, audited. The
// statement's comment names the credential, its address and the user of
// qtop, so the server's log says who.
func (s httpAPI) handlePGSignal(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "use POST", 0)
		return
	}
	body, who, ok := s.policyPost(w, r, "signal")
	if !ok {
		return
	}
	var sig api.PGSignal
	if err := decodeOne(body, &sig, `{"action":"cancel","pid":4242,"query_start":"2026-07-01T18:00:00.123456Z"}`); err != nil {
		writeError(w, http.StatusBadRequest, "signal: "+err.Error(), 0)
		return
	}
	if err := checkSignal(sig); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	s.pg.mu.Lock()
	pool := s.pg.pool
	s.pg.mu.Unlock()
	if pool == nil {
		writeError(w, http.StatusServiceUnavailable, "this collector samples no PostgreSQL (start it with --postgres DSN), or its connection is down: "+s.pgErr(), 0)
		return
	}
	actor := "collector " + who
	if sig.Actor != "" {
		actor += " for " + sig.Actor
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	t := pgactivity.Target{PID: sig.PID, QueryStart: sig.QueryStart, BackendStart: sig.BackendStart, XactStart: sig.XactStart}
	var err error
	if sig.Action == api.SignalCancel {
		err = pgactivity.CancelStatement(ctx, pool, t, actor)
	} else {
		err = pgactivity.TerminateSession(ctx, pool, t, actor)
	}
	now := s.cfg.Now().UTC()
	switch {
	case errors.Is(err, pgactivity.ErrMovedOn), errors.Is(err, pgactivity.ErrNoBackend):
		// It runs something else now, or has ended: nothing signalled.
		writeError(w, http.StatusConflict, err.Error(), 0)
		return
	case errors.Is(err, pgactivity.ErrInsufficientPrivilege):
		writeError(w, http.StatusForbidden, err.Error()+" (the collector's --postgres role needs pg_signal_backend)", 0)
		return
	case errors.Is(err, pgactivity.ErrBadPID):
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	case err != nil:
		writeError(w, http.StatusBadGateway, "signal: "+err.Error(), 0)
		return
	}
	s.policy.audit(r.Context(), now, who, "pg-"+sig.Action, s.policy.current().Version, sig)
	writeJSON(w, http.StatusOK, map[string]string{"result": "done"})
}

// checkSignal bounds a signal request before anything runs.
func checkSignal(sig api.PGSignal) error {
	switch {
	case sig.Action != api.SignalCancel && sig.Action != api.SignalTerminate:
		return fmt.Errorf("signal: action %q: want %s or %s", sig.Action, api.SignalCancel, api.SignalTerminate)
	case sig.PID <= 0:
		return fmt.Errorf("signal: pid %d", sig.PID)
	case sig.Action == api.SignalCancel && sig.QueryStart.IsZero():
		return errors.New("signal: a cancel needs the statement's query_start (only what was shown is cancelled)")
	case sig.Action == api.SignalTerminate && sig.BackendStart.IsZero():
		return errors.New("signal: a terminate needs the session's backend_start (only what was shown is terminated)")
	case len(sig.Actor) > api.MaxSignalActor:
		return fmt.Errorf("signal: actor longer than %d bytes", api.MaxSignalActor)
	}
	if policy.StripControl(sig.Actor) != sig.Actor {
		return errors.New("signal: control characters in actor")
	}
	return nil
}

// pgErr is the sampler's last error, for a refusal.
func (s httpAPI) pgErr() string {
	s.pg.mu.Lock()
	defer s.pg.mu.Unlock()
	if s.pg.err == "" {
		return "no error recorded"
	}
	return s.pg.err
}
