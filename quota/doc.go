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
// crossed, and stays listed until it falls below 0.8 of that. A listed
// tenant's allowances are sized so that what every process may admit
// before its next reply sums to the limit (and 1 % of slack). What the
// sources may admit is counted as their allowances, and the demand of
// those without one yet (they reported before the tenant was listed, and
// are not limited until their next reply); an allowance above twice a
// process's demand counts as twice it. A reporting process gets its share
// of the limit, less half of what the sources would then hold above it
// (or, over the limit, plus half of what they leave, up to 1.5 × its
// share): shares reported at different times do not sum to the limit,
// and each report halves the difference, so that the sum stays at the
// limit and the allowances converge to the shares. Under its limit no
// process gets less than an equal part of the headroom, so a quiet
// process is not refused.
//
// RU admitted above the limit is debt (the fleet's admitted rate, the sum
// of every process's last window, integrated against the limit) that
// lowers later allowances (WithRepay, WithMaxCut); unused limit is banked
// only up to 5 % of a second of it. What is admitted in windows that began
// before the tenant was listed, or went over its limit from under it, is
// forgiven: the allowances in force then were not sized for it.
//
// With several collectors (Local, SetRemote, and package redisquota for
// the exchange), each keeps the others' demand as a multiple of its own
// at the time they wrote it, so that between exchanges their sums follow
// its own, fresher, reports: a fleet-wide change shows in every
// collector's reports at once, and sums an exchange old would otherwise
// give each collector too large a part of the limit.
//
// The Gate admits by default: a tenant without a verdict, or whose
// verdict expired (the collector unreachable for longer than For), is
// admitted, and only the process's own per-process plan (its local
// bucket, defence in depth) applies. An allowance is a token bucket (a
// gcra.Bucket) that may go into debt: a process that admitted more than
// its share pays it back before admitting again, across intervals.
package quota
