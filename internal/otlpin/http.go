package otlpin

import (
	"bytes"
	"compress/gzip"
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
// 401 when WithAuth refuses, and 503 with Retry-After when the request
// should be sent again later.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.httpText(w, http.StatusMethodNotAllowed, "use POST", reqUnsupported)
		return
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	jsonBody := false
	switch mt {
	case ContentTypeProtobuf:
	case ContentTypeJSON:
		jsonBody = true
	default:
		r.httpText(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("content type %q: send %s or %s", mt, ContentTypeProtobuf, ContentTypeJSON), reqUnsupported)
		return
	}
	gz := false
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz = true
	default:
		r.httpStatus(w, jsonBody, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("content encoding %q: send gzip or none", enc), 0, reqUnsupported)
		return
	}
	if r.cfg.auth != nil && !r.cfg.auth(req.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
		r.httpStatus(w, jsonBody, http.StatusUnauthorized, codes.Unauthenticated, "missing or wrong bearer token", 0, reqUnauthorized)
		return
	}
	if req.ContentLength > r.cfg.maxBody {
		r.httpStatus(w, jsonBody, http.StatusRequestEntityTooLarge, codes.InvalidArgument,
			fmt.Sprintf("body of %d bytes, at most %d", req.ContentLength, r.cfg.maxBody), 0, reqTooLarge)
		return
	}
	if retry, err := r.acquire(); err != nil {
		r.httpStatus(w, jsonBody, http.StatusServiceUnavailable, codes.Unavailable, err.Error(), retry, reqBusy)
		return
	}
	defer r.release()
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 4<<20 {
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	if err := r.readBody(w, req, gz, buf); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		r.httpStatus(w, jsonBody, status, codes.InvalidArgument, err.Error(), 0, resultOf(Result{}, err))
		return
	}
	body := buf.Bytes()
	if jsonBody {
		// protojson builds the message tree: a few times the text in
		// memory, so JSON gets a quarter of the decoded limit.
		if limit := r.cfg.maxDecoded / 4; int64(len(body)) > limit {
			r.httpStatus(w, true, http.StatusRequestEntityTooLarge, codes.InvalidArgument,
				fmt.Sprintf("JSON body of %d bytes, at most %d: send protobuf, or smaller batches", len(body), limit), 0, reqTooLarge)
			return
		}
		var err error
		if body, err = jsonToProto(body); err != nil {
			r.httpStatus(w, true, http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0, reqMalformed)
			return
		}
	}
	res, err := r.Consume(body)
	if err != nil {
		status, code := http.StatusBadRequest, codes.InvalidArgument
		if errors.Is(err, ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		r.httpStatus(w, jsonBody, status, code, err.Error(), 0, resultOf(res, err))
		return
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	if res.Rejected > 0 {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: int64(res.Rejected), ErrorMessage: res.Message}
	}
	r.met.requests.WithLabelValues("http", resultOf(res, nil)).Inc()
	writeMessage(w, jsonBody, http.StatusOK, resp)
}

// readBody reads the body, gunzipped when gz, into buf within the limits:
// maxBody as sent, maxDecoded once decompressed (so a gzip bomb stops at
// the limit).
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, gz bool, buf *bytes.Buffer) error {
	var src io.Reader = http.MaxBytesReader(w, req.Body, r.cfg.maxBody)
	if gz {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return bodyErr(err, r.cfg.maxBody)
		}
		defer zr.Close()
		src = zr
	}
	n, err := buf.ReadFrom(io.LimitReader(src, r.cfg.maxDecoded+1))
	if err != nil {
		return bodyErr(err, r.cfg.maxBody)
	}
	if n > r.cfg.maxDecoded {
		return fmt.Errorf("%w: more than %d bytes once decompressed", ErrTooLarge, r.cfg.maxDecoded)
	}
	return nil
}

func bodyErr(err error, limit int64) error {
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

func writeMessage(w http.ResponseWriter, jsonBody bool, status int, m proto.Message) {
	var b []byte
	var err error
	ct := ContentTypeProtobuf
	if jsonBody {
		ct = ContentTypeJSON
		b, err = protojson.Marshal(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	w.Write(b)
}
