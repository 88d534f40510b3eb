package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestExplainOnTheRealServer: EXPLAIN of a statement's text, planned and
// not run (an INSERT leaves no row); a statement with parameters is
// refused with the reason; e on the Statements view shows the plan, and
// again hides it.
func TestExplainOnTheRealServer(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := NewPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	table := "qtop_explain_" + strings.ReplaceAll(suffix(t), "-", "_")
	if _, err := src.pool.Exec(ctx, "CREATE TABLE "+table+" (n int)"); err != nil {
		t.Fatal(err)
	}
	defer src.pool.Exec(context.Background(), "DROP TABLE "+table)
	db := src.pool.Config().ConnConfig.Database
	plan, err := src.Explain(ctx, db, "INSERT INTO "+table+" SELECT generate_series(1, 10);")
	if err != nil || !strings.Contains(plan, "Insert on "+table) {
		t.Fatalf("plan %q: %v", plan, err)
	}
	var n int
	if err := src.pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
		t.Fatalf("EXPLAIN ran the statement: %d rows, %v", n, err)
	}
	if _, err := src.Explain(ctx, db, "SELECT 1; DROP TABLE "+table); !errors.Is(err, ErrCannotExplain) {
		t.Fatalf("two statements: %v", err)
	}

	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	s := incident()
	s.Statements = []api.StatementRow{
		{PID: 1, Database: db, State: "active", Duration: 2 * time.Second, Query: "SELECT count(*) FROM " + table},
		{PID: 2, Database: db, State: "active", Duration: time.Second, Query: "SELECT * FROM " + table + " WHERE n = $1"},
	}
	m.Update(snapshotMsg{s})
	runCmd(t, m, press(m, "3", "e"))
	mustContain(t, m.View(), "EXPLAIN of pid 1 (not executed; e hides)", "Seq Scan on "+table)
	press(m, "e")
	if strings.Contains(m.View(), "EXPLAIN of pid 1") {
		t.Fatal("e did not hide the plan")
	}
	if cmd := press(m, "down", "e"); cmd != nil {
		t.Fatal("a statement with parameters was sent to EXPLAIN")
	}
	mustContain(t, strings.Join(strings.Fields(m.View()), " "), "with parameters ($1 …); PostgreSQL 15 cannot plan it without their values")
}
