package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/report"
)

// The front door of POST /v1/reports: the handler reads and checks the
// request, takes a decode slot and memory, decodes, hands the report to
// Server.consume and maps its refusals to statuses (refusalStatus);
// refusals for what a request is are held back (intake.hold).

// bodyBufs keeps the buffers report bodies are read into: nothing keeps a
// body once its report is decoded and logged (the log copies it), and
// reading each into new memory was a quarter of what the collector
// allocated under load, so a third of its collections.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// pooledBodyBytes is the largest buffer kept for reuse: a large (or
// forged) body's is left to the GC.
const pooledBodyBytes = 256 << 10

func putBodyBuf(b *bytes.Buffer) {
	if b.Cap() <= pooledBodyBytes {
		b.Reset()
		bodyBufs.Put(b)
	}
}

// handleReports is POST /v1/reports.
func (h httpAPI) handleReports(w http.ResponseWriter, r *http.Request) {
	// A refusal for what the request is, not for how busy the collector
	// is, is held back (Config.RefusalDelay).
	refuse := func(status int, reason, msg string) {
		h.in.holdRefusal(w, r, status)
		h.reject(w, status, reason, msg, 0)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		h.reject(w, http.StatusMethodNotAllowed, reasonMethod, "use POST", 0)
		return
	}
	if _, err := h.Authorize(r, RoleReport); err != nil {
		refuse(http.StatusUnauthorized, reasonUnauthorized, err.Error())
		return
	}
	age, status, reason, msg := reportHead(r)
	if status != 0 {
		refuse(status, reason, msg)
		return
	}
	buf := bodyBufs.Get().(*bytes.Buffer)
	defer putBodyBuf(buf)
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, report.MaxReportBytes))
	body := buf.Bytes()
	if err != nil {
		status, reason, msg := h.bodyError(err)
		refuse(status, reason, msg)
		return
	}
	// A header that cannot be decoded (a bomb, a claim beyond what the
	// body can expand to) is refused before it takes a decode slot.
	if err := report.CheckHeader(body); err != nil {
		status, reason := decodeStatus(err)
		refuse(status, reason, err.Error())
		return
	}
	// Bound the reports decoded at once, and the memory they may take
	// (the body is read first, under the server's read timeout, so a slow
	// client holds no slot).
	if !h.in.waitSlot(r.Context()) {
		h.reject(w, http.StatusServiceUnavailable, reasonBusy, "collector busy", time.Second)
		return
	}
	budget := report.DecodeBudget(body)
	if !h.in.decode.TryAcquire(budget) {
		<-h.in.inflight
		h.reject(w, http.StatusServiceUnavailable, reasonBusy, "collector busy decoding other reports", time.Second)
		return
	}
	t0 := time.Now()
	d := h.in.take()
	d.age = age
	var reply report.Reply
	if err = reports.DecodeInto(&d.rep, body); err == nil {
		reply, err = h.consume(d, body, t0)
	} else {
		err = errDecode{err}
	}
	h.in.give(d)
	h.in.decode.Release(budget)
	<-h.in.inflight
	if err != nil {
		status, reason, retry := refusalStatus(err)
		h.in.holdRefusal(w, r, status)
		h.reject(w, status, reason, err.Error(), retry)
		return
	}
	h.writeReply(w, reply)
}

// lateAfter is the age (report.AgeHeader) from which a report counts in
// the history and the cost report but not in the live view: a backlog
// that a reporter sends when the collector is back (after an outage, a
// restart) would otherwise land in the second it arrives, many seconds'
// load at once — a false spike of every tenant it carries, and a false
// offender. One retry after a busy answer (Retry-After 1 s) stays fresh.
const lateAfter = 3 * time.Second

// reportAge reads report.AgeHeader: absent is fresh (a reporter before
// it, another client).
func reportAge(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want whole milliseconds since the window was cut", report.AgeHeader, clip(v))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// reportHead checks what the headers of POST /v1/reports say — media
// type, encoding, length, age — before the body is read: the status,
// metric reason and message of a refusal, or status 0 and the report's age.
func reportHead(r *http.Request) (age time.Duration, status int, reason, msg string) {
	if ct := r.Header.Get("Content-Type"); !contentTypeIs(ct, report.ContentType) {
		return 0, http.StatusUnsupportedMediaType, reasonContentType,
			fmt.Sprintf("Content-Type %q: a report is %s", ct, report.ContentType)
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return 0, http.StatusUnsupportedMediaType, reasonContentType,
			fmt.Sprintf("Content-Encoding %q: a report is sent as it is (its payload is compressed inside)", ce)
	}
	if r.ContentLength > report.MaxReportBytes {
		return 0, http.StatusRequestEntityTooLarge, reasonTooLarge,
			fmt.Sprintf("report of %d bytes, at most %d", r.ContentLength, report.MaxReportBytes)
	}
	age, err := reportAge(r.Header.Get(report.AgeHeader))
	if err != nil {
		return 0, http.StatusBadRequest, reasonMalformed, err.Error()
	}
	return age, 0, "", ""
}

// writeReply writes the reply to an accepted report.
func (h httpAPI) writeReply(w http.ResponseWriter, reply report.Reply) {
	b, err := report.EncodeReply(reply)
	if err != nil {
		h.log.Error("reply cannot be encoded; sending none", "err", err)
		b, _ = report.EncodeReply(report.Reply{Accepted: true})
	}
	w.Header().Set("Content-Type", report.ReplyContentType)
	w.Write(b)
}

// The refusals of Consume. The HTTP handler of POST /v1/reports is the
// only place that turns them into statuses (refusalStatus).
var (
	errShuttingDown = errors.New("collector shutting down")
	errAdmission    = errors.New("source over its report rate")
	errPending      = errors.New("the same report is being logged; retry")
	errStale        = errors.New("sequence too far behind")
	errWAL          = errors.New("collector cannot log the report")
)

// errDecode is a body that is not a report (report.ErrMalformed and its
// kin): only the HTTP handler decodes.
type errDecode struct{ err error }

func (e errDecode) Error() string { return e.err.Error() }
func (e errDecode) Unwrap() error { return e.err }

// refusalStatus maps a refusal of POST /v1/reports to its status, its
// metric reason and its Retry-After.
func refusalStatus(err error) (status int, reason string, retry time.Duration) {
	retry, _ = report.IsRetryable(err)
	var de errDecode
	switch {
	case errors.As(err, &de):
		status, reason = decodeStatus(de.err)
		return status, reason, 0
	case errors.Is(err, errAdmission):
		return http.StatusTooManyRequests, reasonAdmission, retry
	case errors.Is(err, errStale):
		return http.StatusConflict, reasonStale, 0
	case errors.Is(err, errDiskReserve):
		return http.StatusServiceUnavailable, reasonDisk, retry
	case errors.Is(err, errWAL):
		return http.StatusServiceUnavailable, reasonWAL, retry
	case errors.Is(err, errShuttingDown), errors.Is(err, errPending):
		return http.StatusServiceUnavailable, reasonBusy, retry
	case errors.Is(err, report.ErrInvalid):
		return http.StatusBadRequest, reasonMalformed, 0
	}
	if retry > 0 {
		return http.StatusServiceUnavailable, reasonBusy, retry
	}
	return http.StatusBadRequest, reasonMalformed, 0
}

// take returns a decoded report from the pool, or a new one.
func (in *intake) take() *decoded {
	select {
	case d := <-in.reports:
		return d
	default:
		return new(decoded)
	}
}

// give hands d back to the pool, keeping the rows of a small report (and
// their latencies' memory), nothing else.
func (in *intake) give(d *decoded) {
	if cap(d.rep.Rows) > pooledRows {
		return
	}
	d.rep.Reset()
	d.age = 0
	select {
	case in.reports <- d:
	default:
	}
}

// bodyError is the answer to a report whose body could not be read: too
// large (413), not arriving in time (408), or cut short (400). The error
// itself names the connection's addresses: the log may, the client need
// not.
func (h httpAPI) bodyError(err error) (status int, reason, msg string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Sprintf("report larger than %d bytes", report.MaxReportBytes)
	case isTimeout(err):
		return http.StatusRequestTimeout, reasonMalformed, "the report's body did not arrive in time"
	}
	h.log.Debug("report body unreadable", "err", err)
	return http.StatusBadRequest, reasonMalformed, "the report's body was cut short or could not be read"
}

// isTimeout reports an error of a read that waited past its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// reject answers a report refused with status, counting reason.
func (h httpAPI) reject(w http.ResponseWriter, status int, reason, msg string, retry time.Duration) {
	h.met.rejected.WithLabelValues(reason).Inc()
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
	}
	if retry > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int((retry+time.Second-1)/time.Second)))
	}
	b, _ := report.EncodeReply(report.Reply{Accepted: false, RetryAfter: retry, Message: msg})
	w.Header().Set("Content-Type", report.ReplyContentType)
	w.WriteHeader(status)
	w.Write(b)
}

// slotWait is how long a report waits for a decode slot before 503: a
// burst is queued briefly (its body already counted in the decode
// memory) rather than refused at once.
const slotWait = 250 * time.Millisecond

// waitSlot takes a decode slot, waiting up to slotWait (or until ctx
// ends).
func (in *intake) waitSlot(ctx context.Context) bool {
	select {
	case in.inflight <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(slotWait)
	defer t.Stop()
	select {
	case in.inflight <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// maxHeldRefusals bounds the refusals held back at once (Config.RefusalDelay).
const maxHeldRefusals = 512

// holdRefusal holds back the answer to a report refused with status for
// what it is (see Config.RefusalDelay); when maxHeldRefusals are already
// held, it marks the answer to close its connection instead.
func (in *intake) holdRefusal(w http.ResponseWriter, r *http.Request, status int) {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
	default:
		return
	}
	if !in.hold(r.Context(), nil) {
		w.Header().Set("Connection", "close")
	}
}

// hold holds back the answer to a request refused for what it is, for
// Config.RefusalDelay or until ctx, stop or the server ends; it returns
// false at once, holding nothing, when maxHeldRefusals are already held
// (the answer goes at once and its connection should close). The report
// door and the OTLP receiver share the places.
func (in *intake) hold(ctx context.Context, stop <-chan struct{}) bool {
	if in.refusalDelay <= 0 {
		return true
	}
	select {
	case in.held <- struct{}{}:
	default:
		in.guard.refusalsUnheld.Inc()
		return false
	}
	defer func() { <-in.held }()
	in.guard.refusalsHeld.Inc()
	t := time.NewTimer(in.refusalDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-in.done:
	case <-stop:
	}
	return true
}
