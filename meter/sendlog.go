package meter

import (
	"crypto/x509"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// sendLogEvery is how often a reporter whose reports keep failing says
// so again.
const sendLogEvery = time.Minute

// sendLog tells the reporter's logger (WithLogger) when its reports start
// to fail, every sendLogEvery while they keep failing, and when they are
// delivered again: a process whose reports never reach the collector
// (a wrong token, a CA it does not trust, a collector down) is otherwise
// missing from qtop without a word. Successes cost one uncontended lock.
type sendLog struct {
	log *slog.Logger // nil: nothing is logged

	mu       sync.Mutex
	failing  bool
	since    time.Time // the first failure of the run
	lastSaid time.Time
	failures int // of the run

	replySaid   time.Time // when an unreadable reply was last logged
	sectionSaid time.Time // when a section that could not be encoded was

	dropped   int       // reports dropped from a full queue since the last delivery
	dropSince time.Time // the first of them
	dropSaid  time.Time
	queueLen  int       // the queue's bound, for the message
	pacedAt   time.Time // the first 429 with a delay since the last delivery
	pacedSaid time.Time
}

// sectionFailed logs, at most once a sendLogEvery, that a section of the
// process's own (tag) could not be encoded and its report went without
// it.
func (l *sendLog) sectionFailed(now time.Time, tag uint64, err error) {
	if l.due(&l.sectionSaid, now) {
		l.log.Warn("qtop: a report section could not be encoded; the report is sent without it", "section", tag, "err", err.Error())
	}
}

// failed records a failed attempt (err: what went wrong; dropped: the
// report was refused for good rather than queued for another try).
func (l *sendLog) failed(now time.Time, err error, dropped bool) {
	if l.log == nil {
		return
	}
	l.mu.Lock()
	l.failures++
	first := !l.failing
	if first {
		l.failing, l.since = true, now
	}
	say := first || now.Sub(l.lastSaid) >= sendLogEvery
	if say {
		l.lastSaid = now
	}
	n, since := l.failures, l.since
	l.mu.Unlock()
	if !say {
		return
	}
	attrs := []any{"err", err.Error()}
	if dropped {
		attrs = append(attrs, "report", "dropped: the collector refused it")
	} else {
		attrs = append(attrs, "report", "kept to send again")
	}
	if hint := sendHint(err); hint != "" {
		attrs = append(attrs, "hint", hint)
	}
	if first {
		l.log.Warn("meter: reports to the collector failing", attrs...)
		return
	}
	attrs = append(attrs, "failures", n, "since", since.UTC().Format(time.RFC3339))
	l.log.Warn("meter: reports to the collector still failing", attrs...)
}

// sent records a delivered report; after failures or drops it says
// how many there were.
func (l *sendLog) sent(now time.Time) {
	if l.log == nil {
		return
	}
	l.mu.Lock()
	l.pacedAt = time.Time{}
	if !l.failing && l.dropped == 0 {
		l.mu.Unlock()
		return
	}
	n, since, dropped := l.failures, l.since, l.dropped
	if !l.failing {
		since = l.dropSince
	}
	l.failing, l.failures, l.dropped = false, 0, 0
	l.dropSaid = time.Time{}
	l.mu.Unlock()
	l.log.Info("meter: reports to the collector delivered again", "failures", n, "for", now.Sub(since).Round(time.Millisecond).String(),
		"dropped", dropped)
}

// queueFull records n reports dropped, the oldest, from a full queue:
// said at once, then at most every sendLogEvery, with how many since
// when; an outage longer than the queue covers loses reports, and the
// log must say so.
func (l *sendLog) queueFull(now time.Time, n int) {
	if l.log == nil {
		return
	}
	l.mu.Lock()
	if l.dropped == 0 {
		l.dropSince = now
	}
	l.dropped += n
	dropped, since, bound := l.dropped, l.dropSince, l.queueLen
	say := l.dropSaid.IsZero() || now.Sub(l.dropSaid) >= sendLogEvery
	if say {
		l.dropSaid = now
	}
	l.mu.Unlock()
	if say {
		l.log.Warn("meter: report queue full: the oldest reports are dropped", "dropped", dropped,
			"since", since.UTC().Format(time.RFC3339), "queue", bound,
			"hint", "the queue holds one report an interval: raise WithQueueLen (the gate's --report-queue) to ride out longer collector outages")
	}
}

// paced records a 429 with a delay: the collector's rate limit spacing
// out a backlog. It is neither a failure nor ends one, so a replay does
// not flip the log between failing and delivered; only a limit that lets
// nothing through for sendLogEvery is said, then at most that often.
func (l *sendLog) paced(now time.Time, err error) {
	if l.log == nil {
		return
	}
	l.mu.Lock()
	if l.pacedAt.IsZero() {
		l.pacedAt = now
	}
	since := l.pacedAt
	say := now.Sub(since) >= sendLogEvery && (l.pacedSaid.IsZero() || now.Sub(l.pacedSaid) >= sendLogEvery)
	if say {
		l.pacedSaid = now
	}
	l.mu.Unlock()
	if say {
		l.log.Warn("meter: the collector's rate limit has let no report through", "err", err.Error(),
			"since", since.UTC().Format(time.RFC3339), "report", "kept to send again")
	}
}

// due says whether a message last said at *said (under l.mu) is to be
// said again at now — once, then at most every sendLogEvery — and notes
// it; never with no logger.
func (l *sendLog) due(said *time.Time, now time.Time) bool {
	if l.log == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !said.IsZero() && now.Sub(*said) < sendLogEvery {
		return false
	}
	*said = now
	return true
}

// unreadable records a 2xx whose body was not a collector's reply: the
// report is taken as delivered (a collector that merged it must not get
// it twice), but whatever answered may well not be a collector (a proxy's
// catch-all page, another service on that port), and the policy in the
// reply is lost. Said once, then at most every sendLogEvery.
func (l *sendLog) unreadable(now time.Time, err error) {
	if l.due(&l.replySaid, now) {
		l.log.Warn("meter: the collector's reply to a report could not be read", "err", err.Error(),
			"report", "taken as delivered; the policy it carried is lost",
			"hint", "check that the collector's URL reaches a qtop collector (not a proxy's page or another service) running this version or a newer one")
	}
}

// sendHint says what to do about the usual causes of err.
func sendHint(err error) string {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	switch {
	case errors.As(err, &ua):
		return "the collector's certificate is signed by a CA this process does not trust: name that CA's PEM file in QTOP_CA_FILE (--ca-file)"
	case errors.As(err, &hn):
		return "the collector's certificate is not for the host in the collector's URL: use a name the certificate holds"
	case strings.Contains(err.Error(), "answered 401"), strings.Contains(err.Error(), "answered 403"):
		return "the collector refused the report token; reports are kept (up to the queue's bound) and sent once it takes the token: check QTOP_TOKEN or QTOP_TOKEN_FILE (--token, --token-file) against the collector's (a token file is read again when it changes; a --token or QTOP_TOKEN takes a restart)"
	case strings.Contains(err.Error(), "HTTP request to an HTTPS server"):
		return "the collector serves https: use https:// in its URL (and QTOP_CA_FILE for its CA)"
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the collector serves plain HTTP: use http:// in its URL, or give it a certificate"
	case strings.Contains(err.Error(), "connection refused"):
		return "nothing listens at the collector's address: is it running, and is the port right?"
	}
	return ""
}
