package tui

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/api"
)

// Explainer is a source that can show the plan of a running statement
// (qtop --postgres), on demand only: e in the Statements view.
type Explainer interface {
	// Explain returns EXPLAIN (without ANALYZE: nothing is executed) of
	// query, planned in database.
	Explain(ctx context.Context, database, query string) (string, error)
}

var _ Explainer = (*Postgres)(nil)

// ErrCannotExplain says why a statement's plan cannot be shown.
var ErrCannotExplain = errors.New("tui: cannot explain")

// params finds the placeholders of a statement sent with parameters
// ($1 …): PostgreSQL before 16 cannot plan it without their values.
var params = regexp.MustCompile(`\$[0-9]+`)

// explainable says whether EXPLAIN can plan r's text as shown, or why not.
func explainable(r *api.StatementRow) error {
	switch {
	case r.Query == "" || r.Query == "<insufficient privilege>":
		return fmt.Errorf("%w: pid %d: its text is not visible to this role", ErrCannotExplain, r.PID)
	case params.MatchString(r.Query):
		return fmt.Errorf("%w: pid %d runs a statement with parameters ($1 …); PostgreSQL 15 cannot plan it without their values "+
			"(16 has EXPLAIN (GENERIC_PLAN)); run EXPLAIN yourself with values", ErrCannotExplain, r.PID)
	}
	return nil
}

// Explain plans query in a read-only transaction with a 5 s statement
// timeout, on a connection to database when it is not the pool's.
func (p *Postgres) Explain(ctx context.Context, database, query string) (string, error) {
	cfg := p.pool.Config().ConnConfig.Copy()
	if database != "" {
		cfg.Database = database
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("%w: connect to database %q: %w", ErrCannotExplain, database, err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '5s'"); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+strings.TrimRight(strings.TrimSpace(query), ";"), pgx.QueryExecModeExec)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCannotExplain, err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCannotExplain, err)
	}
	return strings.Join(plan, "\n"), nil
}

// explainMsg is the plan of the statement of pid, or why there is none.
type explainMsg struct {
	pid  int32
	plan string
	err  error
}

// explain asks the source for the plan of the statement selected.
func (v *statementsView) explain(c *common) tea.Cmd {
	r := v.selected()
	ex, ok := c.src.(Explainer)
	switch {
	case r == nil:
		return c.setStatus("no statement selected", false)
	case !ok:
		return c.setStatus("e explains a running statement: run qtop --postgres DSN", false)
	}
	if v.plan.pid == r.PID {
		v.plan = explainMsg{}
		return nil
	}
	if err := explainable(r); err != nil {
		v.plan = explainMsg{pid: r.PID, err: err}
		return nil
	}
	v.plan = explainMsg{pid: r.PID, plan: "planning …"}
	ctx, db, q, pid := c.ctx, r.Database, r.Query, r.PID
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		plan, err := ex.Explain(ctx, db, q)
		return explainMsg{pid: pid, plan: plan, err: err}
	}
}

// planLines renders the plan shown (e) in at most n lines.
func (v *statementsView) planLines(c *common, n int) []string {
	p := v.plan
	if p.pid == 0 {
		return nil
	}
	head := "EXPLAIN of pid " + strconv.Itoa(int(p.pid)) + " (not executed; e hides)"
	out := []string{c.st.title.Render(clip(head, c.width))}
	if p.err != nil {
		for _, l := range strings.Split(ansi.Wrap(clean(p.err.Error()), max(c.width-2, 10), " "), "\n") {
			out = append(out, c.st.bad.Render(clip("  "+l, c.width)))
		}
		return out[:min(len(out), n)]
	}
	for _, l := range strings.Split(p.plan, "\n") {
		out = append(out, clip("  "+clean(l), c.width))
	}
	return out[:min(len(out), n)]
}
