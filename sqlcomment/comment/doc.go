// Package comment is the format of qtop's SQL tags alone, with no
// driver, no metrics and no cgo: what a program that reads tags needs —
// the collector, the OTLP receiver, the pg_stat_activity sampler —
// without linking the database/sql wrapper that writes them
// (package sqlcomment, which re-exports these names).
//
//   - Parse reads the sqlcommenter tags of a statement
//     (/*route='GET%20%2Fr',tenant='acme'*/), those sqlcomment writes and
//     the variants other tools write; the Key constants name the tags.
//   - Shape hashes a statement's shape (literals, comments and layout
//     aside), which budgets and runaway rules key statements by.
//   - ApplicationName and ParseApplicationName write and read session
//     tagging's application_name ("billing|t=acme|T2"); TenantID is the
//     short id of a tenant whose name does not fit.
//
// The tenant field is unambiguous: it is an id exactly when it starts with
// '~' ("billing|t=~q3kz7pxa2mfc"), since a name's own '~' is always
// percent-encoded ("%7E"). A decoded id is always an id downstream too: a
// tenant really named like one ('~' and 12 of a–z, 2–7,
// tenant.IsSessionID) is counted by every reader under its stand-in
// (tenant.Escape, the name sqlcomment's session tagging writes for it), so its load never shares a row with a session
// whose id is not resolved. Both directions are reversible: the name
// behind an id is what TenantNames (or a comment carrying the name)
// reports, and the stand-in is the name with a hash of it.
//
// Parse and the writer (sqlcomment.Append) skip literals, quoted
// identifiers, dollar quotes and nested comments with one lexer, so the
// two sides agree on where a comment is.
package comment
