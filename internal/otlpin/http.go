package otlpin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// PathTraces is the OTLP/HTTP path of trace exports.
const PathTraces = "/v1/traces"

// Content types of OTLP/HTTP.
const (
	ContentTypeProtobuf = "application/x-protobuf"
	ContentTypeJSON     = "application/json"
)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ServeHTTP serves POST /v1/traces as the OTLP/HTTP specification lays
// out: a body in protobuf (application/x-protobuf) or JSON
// (application/json) encoding, optionally gzip-compressed
// (Content-Encoding: gzip); the answer in the request's encoding — an
// ExportTraceServiceResponse (with partial_success when spans were
// rejected) on 200, a google.rpc.Status otherwise: 400 for a malformed
// body, 413 for one too large, 415 for another media type or encoding,
// 401 when WithAuth refuses (these four held back by WithRefusalHold),
// 408 for a body sent below WithMinRate, and 503 with Retry-After when
// the request should be sent again later.
//
// The credential is checked before the body is read; the body's memory
// is reserved in the budget (WithMemory) as its bytes arrive, before they
// are read (not from the length it declares, so a request that sends
// nothing holds 16 KiB); it is read at WithMinRate or cut; gzip expands at
// most meter.MaxExpansion times what was received, its memory reserved
// once the compressed body is in; and a decode slot is taken only once the
// body is in, so slow senders never hold one.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	jsonBody, gz, ok := r.httpHead(w, req)
	if !ok {
		return
	}
	res, retry, err := r.receiveHTTP(w, req, jsonBody, gz)
	// Every buffer, reservation and slot is given back before the answer,
	// which may be held back.
	switch {
	case err == nil:
		var resp proto.Message // nil: an empty ExportTraceServiceResponse
		if res.Rejected > 0 {
			resp = &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
				RejectedSpans: int64(res.Rejected), ErrorMessage: res.Message}}
		}
		r.met.requests.WithLabelValues("http", resultOf(res, nil)).Inc()
		writeMessage(w, jsonBody, http.StatusOK, resp)
	case errors.Is(err, ErrSlow):
		w.Header().Set("Connection", "close")
		r.httpStatus(w, jsonBody, http.StatusRequestTimeout, codes.InvalidArgument, err.Error(), 0, reqSlow)
	case errors.Is(err, ErrBusy), errors.Is(err, ErrShutdown):
		r.httpStatus(w, jsonBody, http.StatusServiceUnavailable, codes.Unavailable, err.Error(), retry, resultOf(res, err))
	case errors.Is(err, ErrTooLarge):
		r.refuse(w, req, jsonBody, http.StatusRequestEntityTooLarge, err.Error(), reqTooLarge)
	default:
		r.refuse(w, req, jsonBody, http.StatusBadRequest, err.Error(), resultOf(res, err))
	}
}

// receiveHTTP reads the body, reserving its memory as it arrives, takes
// a decode slot and records its spans; it gives everything back before it
// returns.
func (r *Receiver) receiveHTTP(w http.ResponseWriter, req *http.Request, jsonBody, gz bool) (Result, time.Duration, error) {
	if retry, err := r.cfg.admitted(req.ContentLength); err != nil {
		return Result{}, retry, err
	}
	m := bodyMemory{r: r, ctx: req.Context()}
	defer m.release()
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 4<<20 {
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	if err := r.readBody(w, req, gz, jsonBody, buf, &m); err != nil {
		if errors.Is(err, ErrBusy) {
			return Result{}, retrySlots, err
		}
		return Result{}, 0, err
	}
	body := buf.Bytes()
	if jsonBody {
		// protojson builds the message tree: a few times the text.
		if err := m.grow(m.held + 3*int64(len(body))); err != nil {
			return Result{}, retrySlots, err
		}
	}
	done, retry, err := r.acquire(req.Context(), int64(len(body)))
	if err != nil {
		return Result{}, retry, err
	}
	defer done()
	if jsonBody {
		if body, err = jsonToProto(body); err != nil {
			return Result{}, 0, err
		}
	}
	res, err := r.Consume(body)
	return res, 0, err
}

// httpHead checks what the headers say — method, media type, encoding,
// credential, length — before anything of the body is read.
func (r *Receiver) httpHead(w http.ResponseWriter, req *http.Request) (jsonBody, gz, ok bool) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.httpText(w, http.StatusMethodNotAllowed, "use POST", reqUnsupported)
		return false, false, false
	}
	mt := req.Header.Get("Content-Type")
	if mt != ContentTypeProtobuf && mt != ContentTypeJSON { // the exporters' exact values skip the parse
		mt, _, _ = mime.ParseMediaType(mt)
	}
	switch mt {
	case ContentTypeProtobuf:
	case ContentTypeJSON:
		jsonBody = true
	default:
		r.hold(req.Context())
		r.httpText(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("content type %q: send %s or %s", mt, ContentTypeProtobuf, ContentTypeJSON), reqUnsupported)
		return false, false, false
	}
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz = true
	default:
		r.refuse(w, req, jsonBody, http.StatusUnsupportedMediaType, fmt.Sprintf("content encoding %q: send gzip or none", enc), reqUnsupported)
		return false, false, false
	}
	if r.cfg.auth != nil && !r.cfg.auth(req.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
		r.refuse(w, req, jsonBody, http.StatusUnauthorized, errBadToken, reqUnauthorized)
		return false, false, false
	}
	limit := r.cfg.maxBody
	if jsonBody && !gz {
		limit = min(limit, r.cfg.jsonLimit())
	}
	if req.ContentLength > limit {
		r.refuse(w, req, jsonBody, http.StatusRequestEntityTooLarge, fmt.Sprintf("body of %d bytes, at most %d", req.ContentLength, limit), reqTooLarge)
		return false, false, false
	}
	return jsonBody, gz, true
}

// jsonLimit bounds a JSON body once decompressed: protojson builds the
// message tree, a few times the text in memory, so JSON gets a quarter of
// the decoded limit.
func (c *config) jsonLimit() int64 { return c.maxDecoded / 4 }

// bodyMemory is an HTTP request's share of the memory budget
// (WithMemory), taken as its body arrives: a reservingReader takes it
// before the bytes are read, doubling from bodyStep up to what the body
// may be, and what gzip may expand it to, or JSON's message tree, is
// taken once the body is in. So the budget follows what clients sent,
// not what they declared: a request that declares 16 MiB and sends
// nothing holds bodyStep, and one that trickles holds about what it sent
// (until WithMinRate cuts it). What does not fit, after waiting up to
// reserveWait for memory to be given back, is answered busy.
type bodyMemory struct {
	r    *Receiver
	ctx  context.Context
	held int64
}

// bodyStep is the first reservation of a body that declares more (or
// nothing): what WithMinRate's default asks of it in a second.
const bodyStep = 16 << 10

// grow takes the budget up to n bytes, waiting up to reserveWait.
func (m *bodyMemory) grow(n int64) error {
	if n <= m.held {
		return nil
	}
	if err := m.r.mem.takeWait(m.ctx, "", n-m.held, reserveWait); err != nil {
		return err
	}
	m.held = n
	m.r.met.memory.Set(float64(m.r.mem.reserved()))
	return nil
}

func (m *bodyMemory) release() {
	if m.held > 0 {
		m.r.mem.give("", m.held)
		m.held = 0
		m.r.met.memory.Set(float64(m.r.mem.reserved()))
	}
}

// reservingReader reads no more bytes than m holds, growing it (doubling,
// from bodyStep) before it reads beyond; at limit bytes it ends, as an
// io.LimitReader does.
type reservingReader struct {
	r     io.Reader
	m     *bodyMemory
	limit int64
	n     int64
}

func (rr *reservingReader) Read(p []byte) (int, error) {
	if rr.n >= rr.m.held {
		if rr.m.held >= rr.limit {
			return 0, io.EOF
		}
		if err := rr.m.grow(min(max(2*rr.m.held, bodyStep), rr.limit)); err != nil {
			return 0, err
		}
	}
	if room := rr.m.held - rr.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := rr.r.Read(p)
	rr.n += int64(n)
	return n, err
}

// refuse answers a request refused for what it is, after holding the
// answer back (WithRefusalHold); when it could not be held, the
// connection is closed with the answer.
func (r *Receiver) refuse(w http.ResponseWriter, req *http.Request, jsonBody bool, status int, msg, result string) {
	if !r.hold(req.Context()) {
		w.Header().Set("Connection", "close")
	}
	code := codes.InvalidArgument
	if status == http.StatusUnauthorized {
		code = codes.Unauthenticated
	}
	r.httpStatus(w, jsonBody, status, code, msg, 0, result)
}

// readBody reads the body, gunzipped when gz, into buf within the limits:
// maxBody as sent, at WithMinRate; once decompressed, maxDecoded and
// meter.MaxExpansion times what was received (so a gzip bomb stops at
// what its size allows), a quarter of maxDecoded for JSON. A gzip body is
// read whole first, so its length bounds what it may expand to and its
// trailer sizes the buffer once (a growing buffer allocated about three
// times what it held).
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, gz, jsonBody bool, buf *bytes.Buffer, m *bodyMemory) error {
	rc := http.NewResponseController(w)
	var src io.Reader = &rateReader{r: http.MaxBytesReader(w, req.Body, r.cfg.maxBody), dl: rc,
		start: time.Now(), grace: r.cfg.rateGrace, minRate: r.cfg.minRate, now: time.Now}
	// Once the body is in, no read deadline is left to cut the connection
	// (and cancel the request) while it is decoded; the server sets its own
	// again for the next request.
	defer rc.SetReadDeadline(time.Time{})
	limit := r.cfg.maxDecoded
	if jsonBody {
		limit = min(limit, r.cfg.jsonLimit())
	}
	sent := r.cfg.maxBody // chunked: up to the limit may come
	if n := req.ContentLength; n >= 0 {
		sent = n
	}
	if !gz {
		if n := req.ContentLength; n > 0 && n <= limit {
			buf.Grow(int(min(n, bodyStep)) + bytes.MinRead)
		}
		n, err := buf.ReadFrom(&reservingReader{r: src, m: m, limit: min(sent, limit) + 1})
		return readErr(n, err, limit, r.cfg.maxBody, "")
	}
	zbuf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if zbuf.Cap() <= 4<<20 {
			zbuf.Reset()
			bufPool.Put(zbuf)
		}
	}()
	zbuf.Reset()
	if n := req.ContentLength; n > 0 {
		zbuf.Grow(int(min(n, bodyStep)) + bytes.MinRead)
	}
	if _, err := zbuf.ReadFrom(&reservingReader{r: src, m: m, limit: sent + 1}); err != nil {
		return bodyErr(err, r.cfg.maxBody)
	}
	z := zbuf.Bytes()
	limit = min(limit, expansionLimit(int64(len(z)), r.cfg.maxDecoded))
	if err := m.grow(m.held + limit); err != nil {
		return err
	}
	return gunzip(buf, z, limit, r.cfg.maxDecoded)
}

// readErr is readBody's error for what ReadFrom returned: a read error,
// or more than limit bytes.
func readErr(n int64, err error, limit, maxBody int64, what string) error {
	if err != nil {
		return bodyErr(err, maxBody)
	}
	if n > limit {
		return fmt.Errorf("%w: more than %d bytes once decompressed%s: send smaller batches (or protobuf rather than JSON)", ErrTooLarge, limit, what)
	}
	return nil
}

func bodyErr(err error, limit int64) error {
	if errors.Is(err, ErrSlow) || errors.Is(err, ErrBusy) {
		return err
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("%w: body larger than %d bytes", ErrTooLarge, limit)
	}
	return fmt.Errorf("%w: reading body: %v", ErrMalformed, err)
}

// jsonToProto decodes the OTLP/JSON encoding (proto3 JSON, with trace and
// span ids in hex rather than base64, enums as numbers or names) and
// returns the protobuf encoding of the same request.
func jsonToProto(b []byte) ([]byte, error) {
	var req coltracepb.ExportTraceServiceRequest
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				var err error
				if sp.TraceId, err = hexID(sp.TraceId, 16); err != nil {
					return nil, err
				}
				if sp.SpanId, err = hexID(sp.SpanId, 8); err != nil {
					return nil, err
				}
				if sp.ParentSpanId, err = hexID(sp.ParentSpanId, 8); err != nil {
					return nil, err
				}
			}
		}
	}
	return proto.Marshal(&req)
}

// hexID undoes protojson's base64 reading of an id written in hex: the
// bytes it decoded re-encode to the hex text, which gives the id.
func hexID(b []byte, n int) ([]byte, error) {
	if len(b) == 0 || len(b) == n {
		return b, nil
	}
	text := base64.StdEncoding.EncodeToString(b)
	id, err := hex.DecodeString(text)
	if err != nil || len(id) != n {
		return nil, fmt.Errorf("%w: id %q is not %d hex-encoded bytes", ErrMalformed, text, n)
	}
	return id, nil
}

// httpStatus answers with a google.rpc.Status in the request's encoding,
// and Retry-After when retry > 0.
func (r *Receiver) httpStatus(w http.ResponseWriter, jsonBody bool, status int, code codes.Code, msg string, retry time.Duration, result string) {
	r.met.requests.WithLabelValues("http", result).Inc()
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
	}
	writeMessage(w, jsonBody, status, &spb.Status{Code: int32(code), Message: msg})
}

func (r *Receiver) httpText(w http.ResponseWriter, status int, msg, result string) {
	r.met.requests.WithLabelValues("http", result).Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// Content-Type header values, made once.
var (
	ctProtobuf = []string{ContentTypeProtobuf}
	ctJSON     = []string{ContentTypeJSON}
	emptyJSON  = []byte("{}")
)

// writeMessage answers m in the request's encoding (nil: an empty
// message).
func writeMessage(w http.ResponseWriter, jsonBody bool, status int, m proto.Message) {
	var b []byte
	var err error
	ct := ctProtobuf
	switch {
	case m == nil && jsonBody: // an empty message: the answer to almost every export
		ct, b = ctJSON, emptyJSON
	case m == nil:
	case jsonBody:
		ct = ctJSON
		b, err = protojson.Marshal(m)
	default:
		b, err = proto.Marshal(m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header()["Content-Type"] = ct
	w.WriteHeader(status)
	w.Write(b)
}
