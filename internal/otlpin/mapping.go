package otlpin

import (
	"bytes"
	"strconv"
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/tenant"
)

// Attribute names read from spans and resources (current semantic
// conventions and the older names many instrumentations still emit).
const (
	AttrTenant      = "tenant.id"
	AttrTier        = "tenant.tier"
	AttrTenantRoute = "tenant.route"
	AttrRU          = "qtop.ru"

	attrHTTPRoute       = "http.route"
	attrHTTPStatus      = "http.response.status_code"
	attrHTTPStatusOld   = "http.status_code"
	attrRespBodySize    = "http.response.body.size"
	attrRespContentLen  = "http.response_content_length"
	attrDBSystem        = "db.system"
	attrDBSystemName    = "db.system.name"
	attrDBQueryText     = "db.query.text"
	attrDBStatement     = "db.statement"
	attrDBQuerySummary  = "db.query.summary"
	attrDBOperationName = "db.operation.name"
	attrDBOperation     = "db.operation"
	attrDBCollection    = "db.collection.name"
	attrDBTable         = "db.sql.table"
	attrDBRows          = "db.response.returned_rows"

	attrServiceName     = "service.name"
	attrServiceInstance = "service.instance.id"
	attrHostName        = "host.name"

	dbPostgres = "postgresql"
)

// What became of a span; the label values of qtop_otlp_spans_total.
const (
	resRequest   = iota // a SERVER span, recorded as a request
	resJob              // a CONSUMER span, recorded as a job
	resDB               // a PostgreSQL CLIENT span, recorded as DB time
	resDBWaiting        // a PostgreSQL CLIENT span that takes its trace's tenant
	resDropped          // any other span: counted, not recorded
	resRejected         // a span that cannot be read as work (bad times)
	resPool             // a PostgreSQL connection-pool span, recorded as pool wait
	resGated            // a SERVER span of a service behind a gate: its trace's tenant, not a request (WithGated)
	numResults
)

var resultNames = [numResults]string{"request", "job", "db", "db_by_trace", "dropped", "rejected", "pool_wait", "request_gated"}

// mapped is one span the mapping keeps, ready to be recorded.
type mapped struct {
	rec      meter.Record
	tagged   bool // rec.Tags.Tenant came from the span, the resource or a comment
	deferred bool // a DB span whose tenant is its trace's
	why      int  // for resRejected: why (a reject… reason, validate.go)
}

// mapper turns raw spans into records. One is used by one request at a
// time (they are pooled); its interner makes the strings that outlive
// the request.
type mapper struct {
	tenantAttr string
	in         interner
	attrs      [][]byte
	shape      []byte
	req        reqState
	model      ru.Model     // prices requests and jobs without qtop.ru
	dbIv       *dbIntervals // the DB time already counted per trace (shared)
	src        *source      // the source of the resource being read
}

// span maps sp (attributes in m.attrs) of a resource whose tenant is
// resTenant (empty: none). It returns what became of the span.
func (m *mapper) span(sp *rawSpan, resTenant string, out *mapped) (int, error) {
	var kind report.Kind
	switch sp.kind {
	case kindServer:
		kind = report.KindRequest
	case kindConsumer:
		kind = report.KindJob
	case kindClient:
		kind = report.KindDB // if it is a PostgreSQL span, below
	default:
		return resDropped, nil
	}
	*out = mapped{}
	r := &out.rec
	var at spanAttrs
	if err := m.readAttrs(&at, r); err != nil {
		return 0, err
	}
	tn, tier, route, httpRoute, dbSystem := at.tn, at.tier, at.route, at.httpRoute, at.dbSystem
	query, summary, op := at.query, at.summary, at.op
	httpStatus, haveTenant := at.httpStatus, at.haveTenant
	statement := len(query) > 0 || len(summary) > 0 || len(op) > 0
	if kind == report.KindDB && (string(dbSystem) != dbPostgres || !statement && !isPoolSpan(sp.name)) {
		return resDropped, nil
	}
	if out.why = check(sp, r); out.why != rejectNone {
		return resRejected, nil
	}
	if kind == report.KindDB && !statement {
		m.poolWait(sp, &at, resTenant)
		return resPool, nil
	}
	r.Kind = kind
	r.Time = time.Unix(0, int64(sp.end))
	r.Duration = time.Duration(sp.end - sp.start)
	switch {
	case sp.status == statusError:
		r.Err = true
	case sp.status == statusOK:
	case kind == report.KindRequest && httpStatus >= 500:
		r.Err = true
	}
	if haveTenant {
		r.Tags.Tenant = m.in.tenant(tn)
		out.tagged = true
	}
	r.Tags.Tier = m.in.tier(tier)
	switch kind {
	case report.KindDB:
		return m.statement(sp, &at, out), nil
	case report.KindRequest:
		if len(httpRoute) > 0 {
			route = httpRoute
		}
	}
	if len(route) == 0 {
		route = sp.name
	}
	r.Tags.Route = m.in.route(route)
	if !out.tagged {
		if resTenant != "" {
			r.Tags.Tenant, out.tagged = resTenant, true
		} else {
			r.Tags.Tenant = report.UnknownTenant
		}
	}
	if r.RU == 0 { // no qtop.ru: the cost model's price, as the agent's
		r.RU = m.model.Cost(opOf(kind, at.method), r.Bytes, r.Duration)
	}
	if kind == report.KindJob {
		return resJob, nil
	}
	return resRequest, nil
}

// statement finishes the record of a PostgreSQL statement span: the
// tenant of its comment, its statement shape, its DB time not already
// counted for its trace.
func (m *mapper) statement(sp *rawSpan, at *spanAttrs, out *mapped) int {
	r := &out.rec
	query := at.query
	if !at.haveTenant && len(query) > 0 && bytes.Contains(query, []byte("/*")) {
		m.comment(query, r, out)
	}
	if len(at.summary) == 0 && len(at.op) == 0 && len(query) > 0 {
		r.Tags.Route = m.queryShape(query, sp.name)
	} else {
		r.Tags.Route = m.in.route(m.dbShape(at.summary, at.op, at.coll, query, sp.name))
	}
	m.dedupe(sp, r)
	if !out.tagged {
		out.deferred = true
		return resDBWaiting
	}
	return resDB
}

// poolWait records a connection-pool span as pool wait of its tenant (the
// span's, else its resource's; a pool span has no statement to carry a
// comment and is not held for its trace's root).
func (m *mapper) poolWait(sp *rawSpan, at *spanAttrs, resTenant string) {
	t := resTenant
	if at.haveTenant {
		t = m.in.tenant(at.tn)
	}
	if m.src != nil {
		m.src.pool.add(t, time.Duration(sp.end-sp.start))
	}
}

// dedupe makes a statement span's duration the part of it that no other
// statement span of its trace already covered, so that nested or
// overlapping statements of one request count their time once.
func (m *mapper) dedupe(sp *rawSpan, r *meter.Record) {
	id, ok := toTraceID(sp.traceID)
	if !ok || m.dbIv == nil {
		return
	}
	r.Duration = time.Duration(m.dbIv.add(id, sp.start, sp.end, spanID(sp.spanID), spanID(sp.parentID)))
}

// spanAttrs are the attribute values the mapping reads, as found in the
// span (in the request body).
type spanAttrs struct {
	tn, tier, route, httpRoute, dbSystem []byte
	query, summary, op, coll             []byte
	method                               []byte
	httpStatus                           int64
	haveTenant                           bool
}

// readAttrs reads the span's attributes (m.attrs) into at, and the
// numbers into r (checked by check).
func (m *mapper) readAttrs(at *spanAttrs, r *meter.Record) error {
	for _, a := range m.attrs {
		k, raw, err := keyRaw(a)
		if err != nil {
			return err
		}
		id := m.attrID(k)
		if raw == nil || id == aNone {
			continue
		}
		v, err := anyValue(raw)
		if err != nil {
			return err
		}
		switch id {
		case aTenant:
			at.tn, at.haveTenant = m.in.tenantValue(v)
		case aTier:
			at.tier = v.str
		case aTenantRoute:
			at.route = v.str
		case aHTTPRoute:
			at.httpRoute = v.str
		case aHTTPStatus:
			at.httpStatus, _ = v.int()
		case aHTTPMethod:
			at.method = v.str
		case aBytes:
			if n, ok := v.int(); ok && n > 0 {
				r.Bytes = n
			} else if !ok && v.which == fAnyDouble {
				r.Bytes = -1 // NaN or beyond int64: refused below
			}
		case aDBSystem:
			at.dbSystem = v.str
		case aDBQuery:
			at.query = v.str
		case aDBSummary:
			at.summary = v.str
		case aDBOperation:
			at.op = v.str
		case aDBCollection:
			at.coll = v.str
		case aDBRows:
			if n, ok := v.int(); ok && n > 0 {
				r.Rows = n
			} else if !ok && v.which == fAnyDouble {
				r.Rows = -1 // NaN or beyond int64: refused below
			}
		case aRU:
			if f, ok := v.float(); ok && f != 0 {
				r.RU = f // checked below
			}
		}
	}
	return nil
}

// The attributes the mapping reads, by what they are for.
const (
	aNone = iota
	aTenant
	aTier
	aTenantRoute
	aHTTPRoute
	aHTTPStatus
	aBytes
	aDBSystem
	aDBQuery
	aDBSummary
	aDBOperation
	aDBCollection
	aDBRows
	aRU
	aHTTPMethod
)

// attrID says what the attribute named k is for (aNone: not read).
func (m *mapper) attrID(k []byte) int {
	if string(k) == m.tenantAttr {
		return aTenant
	}
	switch string(k) {
	case AttrTier:
		return aTier
	case AttrTenantRoute:
		return aTenantRoute
	case attrHTTPRoute:
		return aHTTPRoute
	case attrHTTPStatus, attrHTTPStatusOld:
		return aHTTPStatus
	case attrRespBodySize, attrRespContentLen:
		return aBytes
	case attrDBSystem, attrDBSystemName:
		return aDBSystem
	case attrDBQueryText, attrDBStatement:
		return aDBQuery
	case attrDBQuerySummary:
		return aDBSummary
	case attrDBOperationName, attrDBOperation:
		return aDBOperation
	case attrDBCollection, attrDBTable:
		return aDBCollection
	case attrDBRows:
		return aDBRows
	case AttrRU:
		return aRU
	case attrHTTPMethod, attrHTTPMethodOld:
		return aHTTPMethod
	}
	return aNone
}

// comment takes the tenant and tier of a sqlcommenter comment in query.
func (m *mapper) comment(query []byte, r *meter.Record, out *mapped) {
	if len(query) > maxCommentQuery {
		query = query[len(query)-maxCommentQuery:] // the comment is at the end
	}
	tags, err := comment.Parse(string(query))
	if err != nil {
		return
	}
	if t, ok := tags[comment.KeyTenant]; ok {
		r.Tags.Tenant = m.in.tenant([]byte(t))
		out.tagged = true
	}
	if t, ok := tags[comment.KeyTier]; ok && r.Tags.Tier == tenant.TierUnset {
		r.Tags.Tier = m.in.tier([]byte(t))
	}
}

// queryShape is the route of a DB span known only by its query text,
// remembered per text: a service runs the same few statements over and
// over.
func (m *mapper) queryShape(query, name []byte) string {
	if s, ok := m.in.shapes[string(query)]; ok {
		return s
	}
	s := m.in.route(m.dbShape(nil, nil, nil, query, name))
	if len(query) <= maxShapeKey {
		if m.in.shapes == nil || len(m.in.shapes) >= maxInterned {
			m.in.shapes = make(map[string]string)
		}
		m.in.shapes[string(query)] = s
	}
	return s
}

// maxShapeKey bounds the query texts remembered by queryShape.
const maxShapeKey = 1024

// maxCommentQuery bounds the text parsed for a comment: the tail of a
// longer statement.
const maxCommentQuery = 4096

// dbShape is the statement shape of a DB span, its route: db.query.summary;
// else db.operation.name and db.collection.name; else the first keyword and
// table of the query text ("SELECT orders"); else the span name.
func (m *mapper) dbShape(summary, op, coll, query, name []byte) []byte {
	if len(summary) > 0 {
		return summary
	}
	if len(op) > 0 {
		if len(coll) == 0 {
			return op
		}
		m.shape = append(append(append(m.shape[:0], op...), ' '), coll...)
		return m.shape
	}
	if len(query) > 0 {
		if s := sqlShape(m.shape[:0], query); len(s) > 0 {
			m.shape = s
			return s
		}
	}
	return name
}

// sqlShape appends the upper-cased first keyword of query and, when one
// follows FROM, INTO, UPDATE, JOIN or TABLE, the first table name: the
// low-cardinality summary of the semantic conventions. It skips leading
// comments and space, and reads at most the first 512 bytes.
func sqlShape(dst, q []byte) []byte {
	if len(q) > 512 {
		q = q[:512]
	}
	words := 0
	i := 0
	for i < len(q) && words < 64 {
		c := q[i]
		switch {
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end := bytes.Index(q[i+2:], []byte("*/"))
			if end < 0 {
				return dst
			}
			i += end + 4
			continue
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			end := bytes.IndexByte(q[i:], '\n')
			if end < 0 {
				return dst
			}
			i += end + 1
			continue
		case !isWordByte(c):
			i++
			continue
		}
		j := i
		for j < len(q) && (isWordByte(q[j]) || q[j] == '.') {
			j++
		}
		w := q[i:j]
		i = j
		words++
		if words == 1 {
			dst = appendUpper(dst, w)
			switch {
			case bytes.EqualFold(w, []byte("UPDATE")), bytes.EqualFold(w, []byte("COPY")):
				return appendTable(dst, q[i:])
			case bytes.EqualFold(w, []byte("SELECT")), bytes.EqualFold(w, []byte("DELETE")),
				bytes.EqualFold(w, []byte("WITH")), bytes.EqualFold(w, []byte("INSERT")),
				bytes.EqualFold(w, []byte("TRUNCATE")):
			default:
				return dst
			}
			continue
		}
		if bytes.EqualFold(w, []byte("FROM")) || bytes.EqualFold(w, []byte("INTO")) ||
			bytes.EqualFold(w, []byte("JOIN")) || bytes.EqualFold(w, []byte("TABLE")) {
			return appendTable(dst, q[i:])
		}
	}
	return dst
}

// appendTable appends " name" for the first identifier of q.
func appendTable(dst, q []byte) []byte {
	i := 0
	for i < len(q) && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' || q[i] == '\r' || q[i] == '"') {
		i++
	}
	j := i
	for j < len(q) && (isWordByte(q[j]) || q[j] == '.') {
		j++
	}
	if j > i && j-i <= 128 {
		dst = append(dst, ' ')
		dst = append(dst, q[i:j]...)
	}
	return dst
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func appendUpper(dst, w []byte) []byte {
	if len(w) > 32 {
		w = w[:32]
	}
	for _, c := range w {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// interner makes the strings that outlive a request, once per distinct
// value, and validates them as the collector validates report strings: a
// tenant that fails tenant.ValidateTenant becomes its stand-in
// (tenant.Substitute: never merged with another tenant's load; an empty
// one, report.UnknownTenant), a route that fails tenant.ValidateRoute
// its own stand-in (tenant.SubstituteRoute: never summed into the
// overflow route report.OtherRoute); each replacement is counted. A route
// really named "other" is its stand-in too (tenant.EscapeValue), apart
// from the overflow; the recorder would escape it as well, and leaves a
// stand-in as it is.
type interner struct {
	tenants, routes map[string]string
	shapes          map[string]string // query text → route (queryShape)
	invalid         uint64            // values replaced since the last take
	num             [20]byte          // an integer tenant in decimal (tenantValue)
}

// maxInterned bounds each map; a full map is cleared.
const maxInterned = 4096

func (in *interner) tenant(b []byte) string {
	if s, ok := in.tenants[string(b)]; ok {
		return s
	}
	s, substituted := tenant.Substitute(string(b))
	switch {
	case s == "":
		in.invalid++
		s = report.UnknownTenant
	case substituted:
		in.invalid++
	}
	if in.tenants == nil || len(in.tenants) >= maxInterned {
		in.tenants = make(map[string]string)
	}
	if len(b) <= tenant.MaxTenantLen {
		in.tenants[string(b)] = s
	}
	return s
}

// tenantValue is the tenant an attribute value names: a string as it is,
// an integer in decimal (tenant ids are often numbers, and SDKs send a
// number as an int); any other type names none and is counted invalid,
// rather than leave the span "(untagged)" without a word.
// An integer is written in the interner's buffer, valid until the next
// call.
func (in *interner) tenantValue(v value) ([]byte, bool) {
	switch v.which {
	case fAnyString:
		return v.str, true
	case fAnyInt:
		return strconv.AppendInt(in.num[:0], v.num, 10), true
	}
	in.invalid++
	return nil, false
}

func (in *interner) route(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := in.routes[string(b)]; ok {
		return s
	}
	s, substituted := tenant.SubstituteRoute(string(b))
	if substituted {
		in.invalid++
	}
	if in.routes == nil || len(in.routes) >= maxInterned {
		in.routes = make(map[string]string)
	}
	if len(b) <= tenant.MaxRouteLen {
		in.routes[string(b)] = s
	}
	return s
}

func (in *interner) tier(b []byte) tenant.Tier {
	if len(b) == 0 {
		return tenant.TierUnset
	}
	if len(b) == 2 && b[0] == 'T' && b[1] >= '0' && b[1] <= '3' {
		return tenant.T0 + tenant.Tier(b[1]-'0')
	}
	if len(b) > 16 {
		in.invalid++
		return tenant.TierUnset
	}
	t, err := tenant.ParseTier(string(b))
	if err != nil {
		in.invalid++
		return tenant.TierUnset
	}
	return t
}

// StatementShape is the route of a PostgreSQL statement span whose only
// description is its query text q (no db.query.summary or
// db.operation.name): the upper-cased first keyword and first table
// ("SELECT orders"), "" if q has none. The collector maps
// pg_stat_statements' normalized texts with it, to match PostgreSQL's own
// measure of a shape with the spans' (it strips constants and $n alike).
func StatementShape(q string) string {
	s := sqlShape(nil, []byte(q))
	if len(s) == 0 {
		return ""
	}
	var in interner
	return in.route(s)
}
