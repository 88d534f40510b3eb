package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// PathPGSignal is where a collector that samples PostgreSQL cancels a
// statement or terminates a session on a user's behalf: POST (admin
// credential) one PGSignal. The collector signals only what was shown —
// the statement that started at QueryStart, the session that connected at
// BackendStart (and, with XactStart, is still in that transaction) —
// checked and signalled in one server-side statement, and audits it.
// Answers: 200 done; 409 the backend moved on (ErrMovedOn); 503 the
// collector samples no PostgreSQL; 400 a bad request.
const PathPGSignal = "/v1/pg/signal"

// The actions of a PGSignal.
const (
	SignalCancel    = "cancel"
	SignalTerminate = "terminate"
)

// MaxSignalActor bounds PGSignal.Actor.
const MaxSignalActor = 128

// PGSignal asks a collector to cancel a statement or terminate a session.
type PGSignal struct {
	Action       string    `json:"action"` // SignalCancel or SignalTerminate
	PID          int32     `json:"pid"`
	QueryStart   time.Time `json:"query_start,omitzero"`   // cancel: the statement
	BackendStart time.Time `json:"backend_start,omitzero"` // terminate: the session
	XactStart    time.Time `json:"xact_start,omitzero"`    // terminate: and its transaction
	// Actor says who asked (a user of qtop), for the server's log beside
	// the credential the collector records.
	Actor string `json:"actor,omitempty"`
}

// ErrMovedOn is returned by Client.Signal when the backend no longer runs
// what was shown (another statement, another session on the pid): nothing
// was signalled.
var ErrMovedOn = errors.New("the backend moved on")

// Signal asks the collector to cancel a statement or terminate a session
// (PathPGSignal) with the collector's admin token. A backend that moved on
// gives an error wrapping ErrMovedOn; a missing or wrong token one
// wrapping ErrUnauthorized.
func (c *Client) Signal(ctx context.Context, s PGSignal, adminToken string) error {
	body, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("api: signal: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(PathPGSignal, false), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	c.authorize(req)
	resp, err := c.send(req, "signal")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = checkStatus(resp)
	switch {
	case err == nil:
		return nil
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w: %w", ErrMovedOn, err)
	case errors.Is(err, ErrUnauthorized):
		return fmt.Errorf("%w (cancel and terminate need the collector's admin token)", err)
	}
	return err
}
