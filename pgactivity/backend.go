package pgactivity

import (
	"strings"
	"time"

	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/tenant"
)

// Backend states as pg_stat_activity reports them.
const (
	StateActive            = "active"
	StateIdle              = "idle"
	StateIdleInTransaction = "idle in transaction"
	StateIdleInAborted     = "idle in transaction (aborted)"
	StateFastpath          = "fastpath function call"
)

// WaitCPU is the wait class of an active session that waits on nothing:
// it is running (or runnable) on a CPU, as Performance Insights names it.
const WaitCPU = "CPU"

// HiddenQuery is the text PostgreSQL shows instead of another role's
// statement to a role without pg_read_all_stats (which pg_monitor includes).
const HiddenQuery = "<insufficient privilege>"

// Backend is one client session, or one parallel worker of a client
// session, as one sample saw it.
type Backend struct {
	PID int32
	// LeaderPID is, for a parallel worker, the pid of the session whose
	// statement it helps run (it shows the same query, so the same tags);
	// 0 for a client session. A worker adds to its tenant's load but is
	// not a statement of its own.
	LeaderPID int32
	Database  string
	User      string
	// Client is the client's address (client_addr); "" for a Unix socket.
	Client string
	// Application is application_name, or the sqlcommenter tag
	// "application" when the session set none. For a session tagged by
	// sqlcomment.ModeSession it is the service alone (the part before
	// the tenant), so grouping by application still groups by service.
	Application string
	// SessionTagged: application_name carried a tenant
	// (sqlcomment.ApplicationName); Tenant and Tier come from it unless
	// the statement's comment names them.
	SessionTagged bool

	// From the statement's sqlcommenter comment (sqlcomment.Parse), else
	// from application_name (SessionTagged); ""
	// (and TierUnset) when untagged, or when the comment is malformed or
	// was cut off by track_activity_query_size. A comment's tenant that is
	// not a valid name (tenant.ValidateTenant: too long, unprintable, in
	// parentheses) is its stand-in (tenant.Substitute), as the OTLP door
	// names it, never merged with another tenant or the untagged load
	// (InvalidTenant); a route that is not valid (tenant.ValidateRoute) is
	// its stand-in too (tenant.SubstituteRoute), as a meter.Recorder names
	// the same request's route.
	Tenant string
	Route  string
	Tier   tenant.Tier
	Tags   map[string]string // every tag of the comment; nil when untagged

	State         string // StateActive, StateIdle, …; "" when hidden
	WaitEventType string // "" when not waiting
	WaitEvent     string

	// QueryStart is when the current (or, for idle sessions, the last)
	// statement started; zero when unknown.
	QueryStart time.Time
	// XactStart is when the session's transaction began; zero outside a
	// transaction. For a session idle in a transaction (often the one
	// holding a lock others wait for) it tells how long it has held it.
	XactStart time.Time
	// BackendStart is when the session connected: with the pid it names
	// the session (a pid is reused once the session ends).
	BackendStart time.Time
	// XminAge is the age in transactions of what the session holds the
	// xmin horizon back with: its snapshot (backend_xmin: REPEATABLE READ
	// and SERIALIZABLE transactions hold theirs to the end) or its own
	// transaction id (backend_xid: a session that wrote and sits idle in
	// transaction holds no snapshot but its xid), whichever is older.
	// VACUUM cannot remove rows dead since; -1 when it holds neither.
	XminAge int64
	Extras
	// Duration is how long the statement has run, by the server's clock,
	// for active sessions; zero for the others.
	Duration time.Duration
	Query    string
	// Truncated: the query text fills track_activity_query_size, so its end
	// (where sqlcommenter puts the comment) may be missing.
	Truncated bool
	// TagsCut: Truncated, and no tag could be read from what is left (a
	// comment at the end of the statement was cut off).
	TagsCut bool
	// Malformed: the statement's comment could not be read whole
	// (sqlcomment.Parse reported ErrMalformed); Tags holds the pairs that
	// were well formed.
	Malformed bool

	// BlockedBy lists the pids that block this session (pg_blocking_pids);
	// nil when it waits for no lock.
	BlockedBy []int32
}

// Active reports whether the session counts toward database load: it is
// running a statement, on a CPU or waiting.
func (b *Backend) Active() bool { return b.State == StateActive || b.State == StateFastpath }

// Hidden reports whether PostgreSQL hid this session's details from the
// sampling role.
func (b *Backend) Hidden() bool { return b.Query == HiddenQuery && b.State == "" }

// Wait returns the session's wait class for load accounting: its
// wait_event_type, or WaitCPU when it waits on nothing.
func (b *Backend) Wait() string {
	if b.WaitEventType == "" {
		return WaitCPU
	}
	return b.WaitEventType
}

// Snapshot is one sample of pg_stat_activity.
type Snapshot struct {
	// Time is when the sample was taken, by the sampler's clock.
	Time     time.Time
	Backends []Backend
	// Hidden counts the sessions whose details PostgreSQL hid from the
	// sampling role (see ErrInsufficientPrivilege).
	Hidden int
	// Malformed, TagsCut and InvalidTenants count the backends of the
	// sample with Backend.Malformed, Backend.TagsCut and
	// Backend.InvalidTenant.
	Malformed, TagsCut, InvalidTenants int
}

// setTags fills the tag fields of b from its query text. A truncated query
// lost its end, where sqlcommenter appends the comment: only a comment that
// opens the statement is read from it. Nothing here panics on any input.
func (b *Backend) setTags() {
	q := b.Query
	if b.Truncated && !endsWithComment(q) {
		t := strings.TrimLeft(q, " \t\r\n")
		end := strings.Index(t, "*/")
		if !strings.HasPrefix(t, "/*") || end < 0 {
			b.TagsCut = true
			return
		}
		q = t[:end+2]
	}
	tags, err := comment.Parse(q)
	b.Malformed = err != nil
	if len(tags) == 0 {
		return
	}
	b.Tags = tags
	// A tenant cannot be refused here: one that is not a valid name counts
	// under its stand-in, apart from every other tenant.
	b.Tenant, _ = tenant.Substitute(tags[comment.KeyTenant])
	// As the recorder names it: escaped, or a route that is not valid
	// under its own stand-in (the tenant kept).
	b.Route, _ = tenant.SubstituteRoute(tags[comment.KeyRoute])
	if t, err := tenant.ParseTier(tags[comment.KeyTier]); err == nil {
		b.Tier = t
	}
	if b.Application == "" {
		b.Application = tags[comment.KeyApplication]
	}
}

// InvalidTenant reports whether the statement's comment named a tenant
// that is not a valid name: Tenant is then its stand-in.
func (b *Backend) InvalidTenant() bool {
	sent := b.Tags[comment.KeyTenant]
	return sent != "" && sent != b.Tenant
}

// endsWithComment reports whether q ends with a closed block comment,
// optionally followed by ';' and spaces.
func endsWithComment(q string) bool {
	q = strings.TrimRight(q, " \t\r\n;")
	return strings.HasSuffix(q, "*/")
}

// Extras are what the sampler reads of a session beside
// pg_stat_activity's own columns.
type Extras struct {
	// LockWait is the lock a session waiting for one asks for: its mode
	// and relation ("RowExclusiveLock on accounts") or lock type
	// ("ShareLock on transactionid"); "" when it waits for none.
	LockWait string
	// QueryID is pg_stat_activity.query_id (PostgreSQL 14 or later, with
	// compute_query_id on or pg_stat_statements loaded): the key of the
	// statement's pg_stat_statements entry; 0 when unknown.
	QueryID int64
}
