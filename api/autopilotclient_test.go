package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClientAutopilot: GET reads the state with the read token; a command
// is posted as one JSON object with the admin token; a refused token says
// that the admin token is needed; a refused command carries the
// collector's reason.
func TestClientAutopilot(t *testing.T) {
	var posted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != PathAutopilot {
			http.NotFound(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		switch {
		case r.Method == http.MethodPost && auth != "Bearer admin":
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(ErrorBody{Error: "policy changes need the admin token"})
			return
		case r.Method == http.MethodGet && auth != "Bearer read":
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			posted = append(posted, string(b))
			if strings.Contains(string(b), "cancel") {
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(ErrorBody{Error: `autopilot: no such action: "ap-9"`})
				return
			}
		}
		w.Write([]byte(`{"status":{"rules":1,"enforcing":1,"paused":true,"acting":true,
			"active":[{"id":"ap-1","rule":"import","tenant":"bigcorp","action":"quota","limit":32,"unit":"RU/s"}]},
			"rules":{"paused":true,"rules":[{"name":"import","mode":"enforce"}]},
			"decisions":[{"kind":"apply","tenant":"bigcorp"}]}`))
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, WithToken("read"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := c.Autopilot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Status.Paused || len(st.Status.Active) != 1 || st.Status.Active[0].Limit != 32 || st.Rules.Rules[0].Name != "import" ||
		len(st.Decisions) != 1 || !strings.Contains(string(st.Decisions[0]), `"bigcorp"`) {
		t.Fatalf("state: %+v", st)
	}
	_, err = c.AutopilotCommand(ctx, AutopilotCommand{Pause: true}, "")
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "need the collector's admin token") {
		t.Fatalf("without the admin token: %v", err)
	}
	if _, err := c.AutopilotCommand(ctx, AutopilotCommand{Pause: true}, "admin"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	_, err = c.AutopilotCommand(ctx, AutopilotCommand{Cancel: "ap-9"}, "admin")
	if !errors.Is(err, ErrStatus) || !strings.Contains(err.Error(), `no such action: "ap-9"`) {
		t.Fatalf("cancel refused: %v", err)
	}
	if want := []string{`{"pause":true}`, `{"cancel":"ap-9"}`}; strings.Join(posted, " ") != strings.Join(want, " ") {
		t.Fatalf("posted %q, want %q", posted, want)
	}
}
