package agent

import (
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// OpenDB opens a database/sql handle whose statements carry the
// sqlcommenter comment of their context's tenant (application = the
// service) and are recorded as database time per tenant, the comment and
// the record always naming the same tenant. For pgx's stdlib driver
// ("pgx", or "pgx/v5") tagged statements skip pgx's per-text statement cache
// (pgxcomment.StdlibExecMode), and WithSQLTagging's session modes tag the
// session instead (pgxcomment.StdlibSession), and a connection opens
// under the service's application_name unless dsn names one
// (nameSessions). opts come after the agent's and so win.
func (a *Agent) OpenDB(driverName, dsn string, opts ...sqlcomment.Option) (*sql.DB, error) {
	if driverName != "pgx" && driverName != "pgx/v5" {
		a.logTagging(driverName, a.cfg.sqlMode.Resolve(false))
		return sqlcomment.Open(driverName, dsn, a.sqlOptions(false, opts)...)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.nameSessions(cfg)
	a.logTagging(driverName, a.cfg.sqlMode.Resolve(true))
	o := append([]sqlcomment.Option{sqlcomment.WithDBDriver("pgx")}, a.sqlOptions(true, opts)...)
	return sql.OpenDB(sqlcomment.WrapConnector(stdlib.GetConnector(*cfg), o...)), nil
}

// nameSessions makes cfg's connections open under the service's
// application_name, unless cfg names one. Behind a transaction pooler
// (PgBouncer) a client that opened without one runs under whatever name
// the previous client of its server connection left, another service's
// among them; and untagged statements show their service.
func (a *Agent) nameSessions(cfg *pgx.ConnConfig) {
	if a.cfg.service == "" || cfg.RuntimeParams["application_name"] != "" {
		return
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = sqlcomment.ApplicationName(a.cfg.service, tenant.Tags{})
}

// WrapConnector is OpenDB for a driver.Connector: sql.OpenDB(a.WrapConnector(c)).
// A connector of pgx's stdlib driver (stdlib.GetConnector) is treated as
// OpenDB treats "pgx", but for the application_name its connections open
// with, which is the connector's to say (nameSessions on its config).
func (a *Agent) WrapConnector(c driver.Connector, opts ...sqlcomment.Option) driver.Connector {
	_, pgx := c.Driver().(*stdlib.Driver)
	if pgx {
		opts = append([]sqlcomment.Option{sqlcomment.WithDBDriver("pgx")}, opts...)
	}
	a.logTagging(fmt.Sprintf("%T", c.Driver()), a.cfg.sqlMode.Resolve(pgx))
	return sqlcomment.WrapConnector(c, a.sqlOptions(pgx, opts)...)
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
