// Package sqlcomment puts sqlcommenter tags on every SQL statement, so
// that PostgreSQL can say which tenant runs what, and reads them back.
//
//	SELECT * FROM reports WHERE id = $1 /*route='GET%20%2Freports',tenant='acme'*/
//
// # Format
//
// Format, Append and Parse follow the public sqlcommenter specification:
// key='value' pairs sorted by key and joined by commas; keys and values
// URL-encoded as encodeURIComponent does (a space is %20, never +), byte by
// byte, so invalid UTF-8 survives; then ' escaped as \'. The comment goes
// after the statement, before a trailing ';' and white space. A statement
// that already has a comment (/* or -- outside literals, quoted identifiers
// and dollar quotes) is left alone, and so is an empty one or one that ends
// inside a literal. No value can close the comment or change the statement:
// '/' is always encoded, so "*/" and "/*" never appear inside it (fuzzed:
// FuzzAppendParse, FuzzCommenter). Parse is the exact inverse and also
// reads the variants seen in the wild: it merges the tags of every block
// comment (the one nearer the end wins a conflict), skips comments of
// prose, keeps the well-formed pairs of a malformed comment, and reads a
// bare '+' as a space (see Parse for the rule). The forms of other tools
// it is tested on are in the repository's testdata/sqlcomments/corpus.json.
//
// The reading side — Parse, Shape, the Key constants and the session
// tag's ApplicationName and ParseApplicationName — is package
// sqlcomment/comment, re-exported here: a program that only reads tags
// (a collector, a pg_stat_activity sampler) imports that package and
// links no driver wrapper.
//
// # database/sql
//
// WrapConnector, WrapDriver, Open and Register wrap a driver so that every
// statement carries the tags of its context: tenant, route and tier from
// tenant.From, the static application and db_driver, opt-in key
// (WithKey; unbounded cardinality) and opt-in traceparent and tracestate
// (WithTraceContext). The wrapper forwards every optional interface of
// database/sql/driver (asserted at compile time); where the wrapped driver
// lacks one, it does exactly what database/sql does without it, so a
// program cannot tell the difference (TestConformance runs the same program
// on fake drivers raw and wrapped and compares results and driver calls).
// Statements and rows are wrapped only with WithObserver; otherwise the
// driver's own are returned. sql.Conn.Raw hands out the wrapper: Unwrap
// reaches the driver's connection.
//
// # Budgets and runaway statements
//
// WithBudgets applies a Budgets (database budgets and runaway rules, from
// the collector's policy through Budgets.SetPolicy) to the statements of
// the wrapper before they are sent: a statement over an Enforce budget is
// refused with an error that errors.Is(err, ErrBudget), one over a Warn
// budget is sent and counted, a runaway statement is cancelled by its
// context deadline and fails with an error that names the rule
// (errors.Is(err, ErrRunaway) and errors.Is(err, context.DeadlineExceeded),
// a *RunawayError). The Budgets type documents matching, estimates,
// limits, transactions and the runaway watch list; pgxcomment does the
// same for pgx.
//
// A statement prepared with PrepareContext carries the tags of the context
// it is prepared in (database/sql also prepares per call, with the call's
// context, for drivers without ExecerContext). Prepare statements shared
// across requests with a context without tags; the Observer attributes
// each execution to the context it runs in either way.
//
// # Statement caches
//
// A comment that varies per request makes each statement text unique, and
// drivers that prepare and cache statements by text then prepare one per
// tenant: a known production incident with sqlcommenter. The defaults are
// chosen against it:
//
//   - bounded tags only (tenant, route, tier, application, db_driver);
//     key and traceparent are opt-in;
//   - traceparent is never put on a prepared statement (PrepareContext),
//     and pgxcomment adds it only in execution modes that prepare nothing;
//   - with pgx, tagged texts are sent in QueryExecModeExec (one round
//     trip, nothing left prepared) while untagged texts keep pgx's statement
//     cache: pgxcomment for pgx itself, pgxcomment.StdlibExecMode for
//     database/sql over pgx's stdlib (WithLeadingArgs).
//
// A tagged statement therefore costs the server a parse and a plan each
// time (it is not prepared); bench/README.md has the measured ratios
// against untagged and against pgx's default mode.
//
// # Sessions
//
// WithMode chooses where the tags go: the comment (ModeComment, the
// default), the session's application_name (ModeSession), both
// (ModeBoth), or ModeAuto (session where the driver sets it in the same
// round trip, comment elsewhere). ApplicationName writes the session tag,
// "billing|t=acme|T2", in at most 63 printable ASCII bytes (what
// PostgreSQL keeps), a tenant whose name does not fit as its TenantID,
// which TenantNames maps back; ParseApplicationName reads it (fuzzed).
// The statements are then sent as written, so drivers keep them
// prepared. pgxcomment implements it for pgx (transaction-local, in the
// round trip of BEGIN or of the statement) and, through WithSession and
// pgxcomment.StdlibSession, for database/sql over pgx's stdlib
// (transaction-local, in the round trip of BEGIN; a statement outside a
// transaction carries the comment). The name is never set for the session,
// so that it cannot outlive its transaction on a server connection that a
// transaction pooler (PgBouncer) hands to other clients.
//
// A transaction takes the tenant of the context it begins with: its
// statements run under that name whatever their own contexts say. A
// transaction begun with a context without a tenant (begun before the
// tenant is known, or by a helper given context.Background()) runs under
// the connection's own name, and its statements, including those
// prepared in it, carry their own context's tenant in the comment, as
// statements outside a transaction do: the name is never set in the middle
// of a transaction, where it would stay on the statements that follow,
// another tenant's among them.
//
// # DB time
//
// WithObserver calls an Observer once per statement (and per begin, commit,
// rollback, prepare, ping) with the context's tags, the statement as sent,
// its duration (for queries until the rows are closed), rows read or
// affected and the error; ingest turns these into DB time per tenant.
// Without an Observer the wrapper reads no clock and wraps no rows.
//
// # What PostgreSQL shows
//
// pg_stat_activity.query shows the statement with its comment while it
// runs, and Parse reads the tags back (tested on a real server). Note that
// PostgreSQL truncates that text at track_activity_query_size (1 kB by
// default): raise it where statements are longer, or the trailing comment
// is cut and Parse reports ErrMalformed (the pgactivity sampler counts such
// statements: qtop_pgactivity_truncated_statements_total). pg_stat_statements, in contrast,
// normalises the statement: the same statement run by three tenants is one
// row, with the text of whichever ran first. The tenant is lost there,
// which is why qtop samples pg_stat_activity instead.
//
// # Speed
//
// A Commenter (the wrapper's and pgxcomment's) keeps two small lock-free
// caches, since the values it writes are bounded by design: the encoded
// comment per tag set (route, tenant, tier; 1,024 slots) and the insert
// position per statement text (256 slots, texts up to 4 KiB). Both are
// direct-mapped, decided by comparing the values themselves, and admit an
// entry on its second miss in a row in its slot, so tags that never come
// back cost two hashes and allocate nothing more. Format and Append place
// the values of this package's keys by rank instead of sorting them, and
// encode eight bytes at a time while they are letters, digits, '-', '.' or
// '_' (a word test), other bytes through a branch-free table; statements
// are lexed a word at a time up to the next quote, '$', '-' or '/'.
//
// The figures, against google/sqlcommenter and against the raw driver,
// are in bench/README.md.
package sqlcomment
