package sqlcomment

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment/tenantnames"
	"github.com/qtop-dev/qtop/tenant"
)

// Mode says where a wrapper puts the tags of a statement: in its comment,
// in the session's application_name, or both.
type Mode uint8

const (
	// ModeComment appends the sqlcommenter comment to every statement; the
	// default.
	ModeComment Mode = iota
	// ModeSession sends statements as written and sets application_name
	// to ApplicationName(service, tags) for the statement's transaction.
	// Where the driver cannot set it in the round trip of a statement
	// outside a transaction (database/sql), that statement carries the
	// comment instead, and so does a statement in a transaction begun
	// without a tenant (see Sessions in the package doc).
	ModeSession
	// ModeBoth does both: the comment keeps route and traceparent on each
	// statement, at the comment's cost (see the package doc).
	ModeBoth
	// ModeAuto is ModeSession where the driver can set application_name
	// in the same round trip as BEGIN or the statement (pgx, and pgx's
	// stdlib with pgxcomment.StdlibSession), ModeComment elsewhere.
	ModeAuto
)

var modeNames = [...]string{"comment", "session", "both", "auto"}

// String returns "auto", "comment", "session" or "both".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ErrMode is returned by ParseMode for an unknown mode.
var ErrMode = errors.New("sqlcomment: unknown tagging mode")

// ParseMode reads "comment", "session", "both" or "auto" ("" is the
// default, comment).
func ParseMode(s string) (Mode, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return ModeComment, nil
	}
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return ModeComment, fmt.Errorf("%w: %q (want comment, session, both or auto)", ErrMode, s)
}

// Resolve returns the mode to use with a driver that can (pipelines) or
// cannot set application_name in the same round trip: ModeAuto becomes
// ModeSession or ModeComment, and a session mode without pipelining
// falls back to the comment.
func (m Mode) Resolve(pipelines bool) Mode {
	switch {
	case !pipelines && m != ModeComment:
		return ModeComment
	case m == ModeAuto:
		return ModeSession
	}
	return m
}

// Session sets application_name on a database/sql driver connection.
// pgxcomment.StdlibSession implements it for pgx's stdlib driver; a
// wrapper without one tags with the comment only.
//
// The name is only ever set for a transaction, by a BEGIN whose context
// has a tenant: a statement outside one, or in a transaction begun
// without a tenant, carries the comment instead (its round trip cannot
// set the name), since a name set for the session would outlive the
// statement and, behind a transaction pooler, tag other clients'
// statements.
//
// A Session that also has a method Application(c driver.Conn) string,
// the connection's own application_name, has it taken as the service
// of the names it sets when WithApplication gives none
// (Commenter.SessionName).
type Session interface {
	// BeginTx begins a transaction on c with application_name set to name
	// until the transaction ends (set_config(…, true)), in the round trip
	// of BEGIN.
	BeginTx(ctx context.Context, c driver.Conn, opts driver.TxOptions, name string) (driver.Tx, error)
}

// ownApplication is a Session that tells a connection's own
// application_name.
type ownApplication interface {
	Application(c driver.Conn) string
}

// sessionConfig is the configuration of WithMode and WithSession.
type sessionConfig struct {
	mode    Mode
	session Session
	names   *TenantNames
}

// WithMode chooses where the tags go (ModeComment by default). For pgx,
// pgxcomment resolves ModeAuto to ModeSession; the database/sql wrapper
// does so only with WithSession.
func WithMode(m Mode) Option { return func(c *config) { c.sess.mode = m } }

// WithSession gives the database/sql wrapper the driver's way to set
// application_name (pgxcomment.StdlibSession for pgx's stdlib).
func WithSession(s Session) Option { return func(c *config) { c.sess.session = s } }

// WithTenantNames records in n the name behind each TenantID the wrapper
// writes into application_name, so that the names can be sent to the
// collector.
func WithTenantNames(n *TenantNames) Option { return func(c *config) { c.sess.names = n } }

// Mode returns the commenter's mode as configured (WithMode).
func (c *Commenter) Mode() Mode { return c.cfg.sess.mode }

// ApplicationName returns the application_name for tags t: the service
// of WithApplication, then t's tenant and tier (see ApplicationName). A
// tenant written as its TenantID is recorded in the TenantNames of
// WithTenantNames. A tenant name ValidateTenant refuses is written as its
// stand-in (tenant.Substitute), the name the collector gives it when it
// reads it from a comment: the same tenant in either mode.
func (c *Commenter) ApplicationName(t tenant.Tags) string { return c.SessionName("", t) }

// SessionName is ApplicationName on a connection whose own
// application_name (its DSN's, or PGAPPNAME) is own: without
// WithApplication, own is the service, as the connection shows it between
// transactions and as ModeComment leaves it, so grouping by application
// does not change with the mode.
func (c *Commenter) SessionName(own string, t tenant.Tags) string {
	service := c.cfg.application
	if service == "" {
		service = own
	}
	t.Tenant, _ = tenant.Substitute(t.Tenant)
	name := ApplicationName(service, t)
	if n := c.cfg.sess.names; n != nil && t.Tenant != "" && strings.Contains(name, tenantIDMark) {
		n.Add(t.Tenant)
	}
	return name
}

// tenantIDMark is how ApplicationName writes a tenant as its TenantID:
// the tenant separator, then the id's leading '~'.
const tenantIDMark = "|t=~"

// Plain returns query as the statement to send in ModeSession: no
// comment, the context's tags for budgets and the Observer.
func (c *Commenter) Plain(ctx context.Context, query string) Statement {
	t, tagged := tenant.Lookup(ctx)
	return Statement{Query: query, Tags: t, Tagged: tagged}
}

// TenantNames remembers, for the tenants written as a TenantID, the name
// behind the id: a bounded map (DefaultTenantNames entries unless
// NewTenantNames says otherwise) that the process sends in its reports
// (Section), so that the collector can show the name. Safe for concurrent
// use; the zero value is not usable.
type TenantNames struct {
	mu    sync.Mutex
	max   int
	all   map[string]string   // id → name
	fresh map[string]struct{} // ids not sent since added (or since the last resend)
	cuts  int                 // Sections made
}

// DefaultTenantNames is NewTenantNames' bound when given n <= 0.
const DefaultTenantNames = 4096

// NewTenantNames returns a TenantNames of at most n names; once full it
// forgets the oldest names already sent first.
func NewTenantNames(n int) *TenantNames {
	if n <= 0 {
		n = DefaultTenantNames
	}
	return &TenantNames{max: n, all: make(map[string]string), fresh: make(map[string]struct{})}
}

// Add records name under TenantID(name) and returns the id. A name
// tenant.ValidateTenant refuses is not recorded (the collector would
// refuse it, and the report section with it): give its stand-in
// (tenant.Substitute), as Commenter.ApplicationName does.
func (n *TenantNames) Add(name string) string {
	id := TenantID(name)
	if tenant.ValidateTenant(name) != nil {
		return id
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.all[id]; ok {
		return id
	}
	if len(n.all) >= n.max {
		for k := range n.all { // any sent one; fresh ones are kept until sent
			if _, f := n.fresh[k]; !f {
				delete(n.all, k)
				break
			}
		}
		if len(n.all) >= n.max {
			return id // every entry waits to be sent: drop this one
		}
	}
	n.all[id] = name
	n.fresh[id] = struct{}{}
	return id
}

// Lookup returns the name behind id.
func (n *TenantNames) Lookup(id string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.all[id]
	return name, ok
}

// ResendEvery is how many Sections pass before every name is sent
// again, so that a collector that restarted (it keeps the names in
// memory) learns them back.
const ResendEvery = 60

// Section returns the names added since the last Section (at most
// tenantnames.MaxReportNames; the rest wait for the next ones), and every
// ResendEvery calls all of them again, as the report section the
// collector reads (tenantnames.Names); nil when there is none. The agent's
// reporter adds it to each report (meter.WithSectionSource).
func (n *TenantNames) Section() report.Section {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cuts++
	if n.cuts%ResendEvery == 0 {
		for id := range n.all {
			n.fresh[id] = struct{}{}
		}
	}
	if len(n.fresh) == 0 {
		return nil
	}
	out := make(tenantnames.Names, 0, min(len(n.fresh), tenantnames.MaxReportNames))
	for id := range n.fresh {
		if len(out) == tenantnames.MaxReportNames {
			break
		}
		out = append(out, tenantnames.Name{ID: id, Name: n.all[id]})
		delete(n.fresh, id)
	}
	return out
}
