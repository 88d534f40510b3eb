package agent

import (
	"database/sql"
	"database/sql/driver"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
)

// OpenDB opens a database/sql handle whose statements carry the
// sqlcommenter comment of their context's tenant (application = the
// service) and are recorded as database time per tenant, the comment and
// the record always naming the same tenant. For pgx's stdlib driver
// ("pgx") tagged statements skip pgx's per-text statement cache
// (pgxcomment.StdlibExecMode), and WithSQLTagging's session modes tag the
// session instead (pgxcomment.StdlibSession). opts come after the agent's
// and so win.
func (a *Agent) OpenDB(driverName, dsn string, opts ...sqlcomment.Option) (*sql.DB, error) {
	return sqlcomment.Open(driverName, dsn, a.sqlOptions(driverName == "pgx", opts)...)
}

// WrapConnector is OpenDB for a driver.Connector: sql.OpenDB(a.WrapConnector(c)).
func (a *Agent) WrapConnector(c driver.Connector, opts ...sqlcomment.Option) driver.Connector {
	return sqlcomment.WrapConnector(c, a.sqlOptions(false, opts)...)
}

func (a *Agent) sqlOptions(pgx bool, opts []sqlcomment.Option) []sqlcomment.Option {
	out := make([]sqlcomment.Option, 0, len(opts)+6)
	out = append(out, sqlcomment.WithApplication(a.cfg.service), sqlcomment.WithObserver(a.obs),
		sqlcomment.WithMode(a.cfg.sqlMode), sqlcomment.WithTenantNames(a.cfg.sqlNames))
	if pgx {
		out = append(out, pgxcomment.StdlibExecMode(), pgxcomment.StdlibSession())
	}
	if a.cfg.budgets != nil {
		out = append(out, sqlcomment.WithBudgets(a.cfg.budgets))
	}
	return append(out, opts...)
}
