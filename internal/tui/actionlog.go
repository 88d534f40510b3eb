package tui

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// actionLog writes one JSON line per action the UI carries out (throttle,
// cancel, terminate, the autopilot's commands): when, who, what, on which
// statement, and how it ended. Writes happen inside tea.Cmds, so it has its own lock.
type actionLog struct {
	mu sync.Mutex
	w  io.Writer
}

// action is one line of the action log.
type action struct {
	Time   time.Time `json:"time"`
	User   string    `json:"user"`
	Source string    `json:"source"`
	// Action is cancel, terminate, throttle, autopilot-pause,
	// autopilot-resume, autopilot-cancel (ID: the autopilot's action) or
	// lift (ID: the policy rule lifted).
	Action string `json:"action"`
	ID     string `json:"id,omitempty"`
	PID    int32  `json:"pid,omitempty"`
	// QueryStart, XactStart and BackendStart are what the action was
	// confirmed on.
	QueryStart   time.Time `json:"query_start,omitzero"`
	XactStart    time.Time `json:"xact_start,omitzero"`
	BackendStart time.Time `json:"backend_start,omitzero"`
	Tenant       string    `json:"tenant,omitempty"`
	Query        string    `json:"query,omitempty"`
	// Result is "done", "moved on" (nothing done) or "error".
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// maxLoggedQuery bounds the statement text kept per action.
const maxLoggedQuery = 500

func (l *actionLog) write(a action) {
	if l == nil || l.w == nil {
		return
	}
	if len(a.Query) > maxLoggedQuery {
		a.Query = a.Query[:maxLoggedQuery]
	}
	b, err := json.Marshal(a)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n')) //nolint:errcheck // the status line reports the action itself
}
