// Package quota enforces per-tenant RU limits across a fleet of processes
// without a remote call on the request path, by batch reporting (after
// Databricks' rate limiter and gubernator's GLOBAL behaviour).
//
// Each process keeps a Gate. The request path asks it (AllowAt) and
// charges it (ChargeAt) locally; every reporting interval the process
// cuts its Usage per tenant (Cut) into its report. The collector feeds
// each report to a Fleet, which sums the latest usage of every process per
// tenant and answers, in the reply to that report, a Verdict for each
// tenant the process must limit (Fleet.Verdicts): a rejection rate and
// the process's allowance, its share of the limit. The process applies
// the answer with Gate.Apply. Only limited tenants are listed, so a reply
// stays small with 10,000 tenants.
//
// A tenant is listed once the fleet's demand reaches half its limit
// (WithNear), so that allowances cap a sudden burst before the limit is
// crossed. Over its limit, the allowances a collector hands out never sum
// more than 3 % above its part of the limit, though each is computed from
// a share reported at its own time (a process whose demand grew first
// gets its full share once the others have reported again); under its
// limit a tenant gets its share and all the fleet's headroom besides, so
// it is not refused. RU admitted above the limit after the first window
// is debt that lowers later allowances (WithRepay, WithMaxCut).
//
// The Gate admits by default: a tenant without a verdict, or whose
// verdict expired (the collector unreachable for longer than For), is
// admitted, and only the process's own per-process plan (its local
// bucket, defence in depth) applies. An allowance is a token bucket that
// may go into debt: a process that admitted more than its share pays it
// back before admitting again, across intervals.
package quota
