package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestPostgresInTmux is the untagged incident of the issue, as a user
// meets it: two untagged sessions of an application "batchjob-…" run
// long statements on the real PostgreSQL; qtop --postgres runs in tmux.
// The load shows as (untagged); b groups it by application, where
// batchjob is its own row; its drill-in lists its statements; in the
// Statements view space marks both, c cancels both after a confirmation,
// only as shown, and the action log says who did it.
func TestPostgresInTmux(t *testing.T) {
	testsvc.RequireTool(t, "tmux", "scripts/test installs it: apt-get install tmux")
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dsn := testsvc.Postgres(t)
	var rb [4]byte
	rand.Read(rb[:])
	app := "batchjob-" + hex.EncodeToString(rb[:])

	type sess struct {
		conn *pgx.Conn
		done chan error
	}
	var sessions []sess
	for range 2 {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		s := sess{conn: conn, done: make(chan error, 1)}
		go func() {
			_, err := conn.Exec(context.Background(), "SELECT pg_sleep(120)")
			s.done <- err
		}()
		sessions = append(sessions, s)
		t.Cleanup(func() {
			conn.PgConn().CancelRequest(context.Background())
			conn.Close(context.Background())
		})
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "qtop")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := &tmuxSession{testsvc.NewTmux(t, filepath.Join(dir, "tmux.sock"))}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(bin + ".stderr")
			t.Logf("qtop's stderr:\n%s", b)
		}
	})
	state := filepath.Join(dir, "state")
	if out, err := s.Run("-f", "/dev/null", "new-session", "-d", "-s", "qtop", "-x", "160", "-y", "40", "-c", dir,
		"env", "TERM=xterm-256color", "XDG_STATE_HOME="+state, "USER=alice", "sh", "-c", `"$0" --postgres "$1" --top 1000 2>"$0.stderr"; echo $? >"$0.exit"`, bin, dsn); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	s.Run("set-option", "-t", "qtop", "remain-on-exit", "on")

	// Untagged load is its own row.
	s.WaitFor("the (untagged) row", 30*time.Second, func(sc string) bool { return strings.Contains(sc, "(untagged)") })

	// b: grouped by application, batchjob is a row of its own.
	s.Keys("b")
	screen := s.WaitFor("the batchjob row", 20*time.Second, func(sc string) bool {
		return strings.Contains(sc, "APPLICATION") && strings.Contains(sc, app)
	})
	t.Logf("grouped by application:\n%s", screen)

	// The filter finds it; enter lists its two statements.
	s.filter(app)
	s.Keys("Enter")
	screen = s.WaitFor("the drill-in of "+app, 20*time.Second, func(sc string) bool {
		return strings.Contains(sc, "Application "+app) && strings.Count(sc, "pg_sleep(120)") == 2
	})
	t.Logf("drill-in:\n%s", screen)
	s.Keys("Escape")
	// (A key sent right after Escape would read as alt+key.)
	s.WaitFor("the Tenants view again", 10*time.Second, func(sc string) bool { return !strings.Contains(sc, "Application "+app) })

	// Statements: filter, mark both, cancel both. One key at a time,
	// each once its effect is on the screen: keys sent together arrive as
	// one burst of runes.
	s.Keys("3")
	s.WaitFor("the Statements view", 10*time.Second, statementsHeader.MatchString)
	s.filter(app)
	s.WaitFor("the filtered statements", 10*time.Second, func(sc string) bool { return strings.Count(sc, "pg_sleep(120)") == 2 })
	for n := 1; n <= 2; n++ {
		s.Keys("Space")
		s.WaitFor(fmt.Sprintf("%d statements marked", n), 10*time.Second, func(sc string) bool { return len(markedPID.FindAllString(sc, -1)) == n })
	}
	s.Keys("c")
	s.WaitFor("the confirmation", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "Cancel the statements of 2 backends") })
	s.Keys("y")
	s.WaitFor("the cancels sent", 20*time.Second, func(sc string) bool { return strings.Contains(sc, "cancel sent to backend") })
	for i, ss := range sessions {
		select {
		case err := <-ss.done:
			if err == nil || !strings.Contains(err.Error(), "cancel") {
				t.Fatalf("session %d: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("session %d was not cancelled", i)
		}
	}
	s.Keys("q")
	s.WaitFor("qtop to exit", 30*time.Second, func(string) bool { _, err := os.Stat(bin + ".exit"); return err == nil })
	b, err := os.ReadFile(filepath.Join(state, "qtop", "actions.log"))
	if err != nil || strings.Count(string(b), `"action":"cancel"`) != 2 || strings.Count(string(b), `"result":"done"`) != 2 ||
		!strings.Contains(string(b), `"query_start":"`) {
		t.Fatalf("action log: %v\n%s", err, b)
	}
}

var (
	statementsHeader = regexp.MustCompile(`PID +TENANT`)
	markedPID        = regexp.MustCompile(`\*\d+ `) // a statement marked with space
)

// filter types / text enter, each step once the screen shows the one
// before: the prompt, the text in it, the filter kept in the title.
func (s *tmuxSession) filter(text string) {
	const prompt = "▏ enter keep"
	s.Keys("/")
	s.WaitFor("the filter prompt", 10*time.Second, func(sc string) bool { return strings.Contains(sc, prompt) })
	s.Keys("-l", text)
	s.WaitFor("the filter typed", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "/"+text+prompt) })
	s.Keys("Enter")
	s.WaitFor("the filter kept", 10*time.Second, func(sc string) bool { return !strings.Contains(sc, prompt) && strings.Contains(sc, "/"+text) })
}
