// Package freshness sheds a stampeding herd without running handlers and
// reports what it saw.
//
// A [Shedder] sheds a stampeding herd (everyone opens the app after a
// push) by answering 304 Not Modified, without running the handler, to
// GETs whose client already holds a recent answer. Every 200 it buffers
// carries an ETag signed by an [ETagSigner] (HMAC-SHA256 under a key the
// fleet shares) with the response's hash and when it was computed, so
// If-None-Match tells the server the age of the client's copy without a
// lookup and a client cannot forge a fresh one. The client names its
// reason in [HeaderCause] (push-notification, app-open, generic-reload;
// anything else is interactive and never shed) and the seconds since the
// app opened in [HeaderAppAge]. Rules of a [policy.Freshness] (a cause,
// a bound on the copy's age, a bound on the app's) are ordered by
// customer impact and armed in batches; armed rules apply only while the
// process is overloaded ([WithOverloadOf]: the latency ratio has raised
// prices, or CoDel drops or a queue stands) or a batch is forced, and a
// shadow rule runs the handler anyway and compares the new hash with the
// client's, which is its precision (qtop_freshness_* metrics).
// [WithSampling] follows 1 caller in N by a keyed hash, recording route,
// caller hash, response hash and time (never the response) for the
// collector's repeat-share report.
//
// What the shedder saw in a window ([Shedder.Drain]) is a [Window], which
// is also the report section (tag 3) that carries it to the collector:
// set it on a report with report.Report.SetSection (meter's
// WithSectionSource does it at every cut) and read it with
// report.SectionOf[freshness.Window].
package freshness
