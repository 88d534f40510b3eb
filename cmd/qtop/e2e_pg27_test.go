package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestPostgresAsPgActivityInTmux is the database part of the second
// incident, as a user meets it: pgbench as noise, a REPEATABLE READ
// session idle in its transaction holding a table in ACCESS EXCLUSIVE
// mode, a tenant's statement waiting for it, and a READ COMMITTED writer
// idle in its transaction (an xid, no snapshot); qtop --postgres in tmux.
// The header shows TPS and the cache hit ratio; 6 shows the lock waited
// for with its mode and relation, the transaction ages and both xmin
// holders; 9 shows the top SQL; at 80×24 the Statements view keeps
// DATABASE and QUERY.
func TestPostgresAsPgActivityInTmux(t *testing.T) {
	testsvc.RequireTool(t, "tmux", "scripts/test installs it: apt-get install tmux")
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dsn := testsvc.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rb [4]byte
	rand.Read(rb[:])
	sfx := hex.EncodeToString(rb[:])
	table := "qtop_e2e27_" + sfx
	connect := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	exec1 := func(c *pgx.Conn, qs ...string) {
		for _, q := range qs {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	admin := connect()
	exec1(admin, "CREATE TABLE "+table+" (n int)")
	holder, writer, waiter := connect(), connect(), connect()
	exec1(holder, "BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM pg_class", "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE")
	exec1(writer, "BEGIN", "SELECT pg_current_xact_id()")
	waitDone := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(context.Background(), "SELECT count(*) FROM "+table+" /*tenant='e2e27-"+sfx+"'*/")
		waitDone <- err
	}()
	t.Cleanup(func() {
		holder.Exec(context.Background(), "ROLLBACK")
		<-waitDone
		admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
	})
	noise := exec.CommandContext(ctx, "pgbench", "-n", "-c", "2", "-T", "120", "-f", "/dev/stdin", dsn)
	noise.Stdin = strings.NewReader("SELECT count(*) FROM pg_class;\n")
	if err := noise.Start(); err != nil {
		t.Fatalf("pgbench: %v", err)
	}
	t.Cleanup(func() { noise.Process.Kill(); noise.Wait() })

	dir := t.TempDir()
	bin := filepath.Join(dir, "qtop")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := &tmuxSession{testsvc.NewTmux(t, filepath.Join(dir, "tmux.sock"))}
	if out, err := s.Run("-f", "/dev/null", "new-session", "-d", "-s", "qtop", "-x", "200", "-y", "50", "-c", dir,
		"env", "TERM=xterm-256color", "XDG_STATE_HOME="+filepath.Join(dir, "state"), "sh", "-c", `"$0" --postgres "$1" 2>"$0.stderr"`, bin, dsn); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	s.WaitFor("the header", 30*time.Second, func(sc string) bool {
		return strings.Contains(sc, " TPS · ") && strings.Contains(sc, "hit ") && !strings.Contains(sc, "hit -")
	})
	s.Keys("6")
	hpid, wpid := strconv.Itoa(int(holder.PgConn().PID())), strconv.Itoa(int(writer.PgConn().PID()))
	screen := s.WaitFor("the lock tree and the xmin holders", 20*time.Second, func(sc string) bool {
		return strings.Contains(sc, "AccessShareLock on qtop_e2e27") && strings.Contains(sc, "ROOT BLOCKER") && strings.Contains(sc, "xact ") &&
			strings.Contains(sc, hpid) && strings.Contains(sc, wpid)
	})
	t.Logf("locks at 200×50:\n%s", screen)
	s.Keys("9")
	screen = s.WaitFor("the top SQL", 20*time.Second, func(sc string) bool {
		return strings.Contains(sc, "TIME ms/s") && strings.Contains(sc, "SELECT count(*) FROM pg_class")
	})
	t.Logf("top SQL at 200×50:\n%s", screen)
	s.Run("resize-window", "-t", "qtop", "-x", "80", "-y", "24")
	s.Keys("Escape")
	s.Keys("3")
	screen = s.WaitFor("the statements at 80×24", 20*time.Second, func(sc string) bool {
		return strings.Contains(sc, "DATABASE") && strings.Contains(sc, "QUERY") && strings.Contains(sc, "SELECT count(*)")
	})
	t.Logf("statements at 80×24:\n%s", screen)
	s.Keys("q")
}
