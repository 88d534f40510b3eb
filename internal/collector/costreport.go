package collector

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// ErrReport: a cost report request is invalid.
var ErrReport = errors.New("collector: invalid report request")

// Cost report measures.
const (
	MeasureRU       = "ru"
	MeasureDBTime   = "db_time"
	MeasureRequests = "requests"
)

// Unattributed names the line of a cost report for load no tenant tag
// covers: work recorded without a tenant and untagged database sessions.
const Unattributed = "(unattributed)"

// ReportRequest asks for a cost-attribution report.
type ReportRequest struct {
	From, To time.Time
	ByRoute  bool
	Measure  string  // MeasureRU (default), MeasureDBTime, MeasureRequests
	Cost     float64 // shared cost to split; 0: shares only
	Currency string
	// Tenant, when set, keeps that tenant's lines alone (see OnlyTenant).
	Tenant string
}

// CostReport is every tenant's usage over [From, To), its share of the
// measure, and its part of the shared cost.
type CostReport struct {
	From     time.Time  `json:"from"`
	To       time.Time  `json:"to"`
	Measure  string     `json:"measure"`
	Cost     float64    `json:"cost,omitempty"`
	Currency string     `json:"currency,omitempty"`
	Lines    []CostLine `json:"lines"`
	Total    CostLine   `json:"total"`
	// Note says what the report cannot count: minutes before the
	// collector's retention, deleted.
	Note string `json:"note,omitempty"`
}

// CostLine is one tenant (or tenant×route) of a CostReport.
type CostLine struct {
	Tenant       string  `json:"tenant"`
	Route        string  `json:"route,omitempty"`
	Requests     uint64  `json:"requests"`
	Errors       uint64  `json:"errors"`
	DBSeconds    float64 `json:"db_seconds"`
	RU           float64 `json:"ru"`
	Bytes        uint64  `json:"bytes"`
	Share        float64 `json:"share"`
	Cost         float64 `json:"cost,omitempty"`
	Unattributed bool    `json:"unattributed,omitempty"`
}

// ParseMeasure checks a measure name ("" is MeasureRU).
func ParseMeasure(s string) (string, error) {
	switch s {
	case "", MeasureRU:
		return MeasureRU, nil
	case MeasureDBTime, MeasureRequests:
		return s, nil
	}
	return "", fmt.Errorf("%w: measure %q: want ru, db_time or requests", ErrReport, clip(s))
}

func (l *CostLine) value(measure string) float64 {
	switch measure {
	case MeasureDBTime:
		return l.DBSeconds
	case MeasureRequests:
		return float64(l.Requests)
	}
	return l.RU
}

// MaxReportRange bounds the range of one cost report: a stranger's
// from=0001-01-01 is a 400 with this reason, not hours of queries.
const MaxReportRange = 400 * 24 * time.Hour

// maxAgeDays bounds an age in days ("7d"), so that it cannot overflow a
// duration.
const maxAgeDays = 100 * 366

// BuildReport queries st over req's range in one pass (one Usage query),
// calling progress (if not nil) with 1 when done. The range is at most
// MaxReportRange.
func BuildReport(ctx context.Context, st store.Store, req ReportRequest, progress func(done float64)) (*CostReport, error) {
	return buildReport(ctx, st, req, progress)
}

// usageReader is what a report reads of a store.
type usageReader interface {
	Usage(ctx context.Context, from, to time.Time, byRoute bool) ([]store.Usage, error)
}

// pastRetention reads nothing: the usage of a range wholly before the
// collector's retention horizon, which a store that drops whole days
// (ClickHouse) may still partly hold but which is deleted all the same.
type pastRetention struct{}

func (pastRetention) Usage(context.Context, time.Time, time.Time, bool) ([]store.Usage, error) {
	return nil, nil
}

// BuildRetainedReport is BuildReport over a store kept for retention (0:
// everything) at now: the minutes before now − retention count nothing,
// and the note says so. A store that deletes whole days (ClickHouse drops
// a day's partition once all of it is past) still holds some of them: the
// report counts from the horizon, and a range that ends before it counts
// nothing, so every store, and the collector and the store read directly,
// give the same bill.
func BuildRetainedReport(ctx context.Context, st store.Store, req ReportRequest, retention time.Duration, now time.Time, progress func(done float64)) (*CostReport, error) {
	horizon := now.Add(-retention).UTC().Truncate(time.Minute)
	if retention <= 0 || !req.From.Before(horizon) {
		return buildReport(ctx, st, req, progress)
	}
	src := usageReader(st)
	if horizon.Before(req.To) {
		req.From = horizon
	} else {
		src = pastRetention{}
	}
	rep, err := buildReport(ctx, src, req, progress)
	if err == nil {
		note := rep.Note // the retention's goes first
		rep.Note = ""
		rep.AddNote(fmt.Sprintf("the minutes before %s are past the collector's retention (%v) and deleted: they count nothing here",
			horizon.Format(time.RFC3339), retention))
		rep.AddNote(note)
	}
	return rep, err
}

func buildReport(ctx context.Context, st usageReader, req ReportRequest, progress func(done float64)) (*CostReport, error) {
	measure, err := ParseMeasure(req.Measure)
	if err != nil {
		return nil, err
	}
	if !(req.Cost >= 0 && req.Cost <= MaxReportCost) { // NaN too
		return nil, fmt.Errorf("%w: cost %v: want a number from 0 to %.0e", ErrReport, req.Cost, MaxReportCost)
	}
	if err := checkRange(req.From, req.To); err != nil {
		return nil, err
	}
	from, to, err := wholeMinutes(req.From, req.To)
	if err != nil {
		return nil, err
	}
	us, err := st.Usage(ctx, from, to, req.ByRoute)
	if err != nil {
		return nil, fmt.Errorf("collector: report: %w", err)
	}
	acc := costLines(us)
	if progress != nil {
		progress(1)
	}
	rep := &CostReport{From: from, To: to, Measure: measure, Cost: req.Cost, Currency: req.Currency}
	var total float64
	for _, l := range acc {
		rep.Lines = append(rep.Lines, *l)
		total = finiteSum(total, l.value(measure))
		addSat(&rep.Total.Requests, l.Requests)
		addSat(&rep.Total.Errors, l.Errors)
		rep.Total.DBSeconds = finiteSum(rep.Total.DBSeconds, l.DBSeconds)
		rep.Total.RU = finiteSum(rep.Total.RU, l.RU)
		addSat(&rep.Total.Bytes, l.Bytes)
	}
	for i := range rep.Lines {
		l := &rep.Lines[i]
		if total > 0 {
			l.Share = l.value(measure) / total
		}
	}
	sortCostLines(rep.Lines)
	rep.Total.Tenant = TotalLine
	rep.Total.Cost = math.Round(req.Cost*100) / 100
	if total > 0 {
		rep.Total.Share = 1
		rep.Total.Cost = splitCost(rep.Lines, req.Cost)
	} else if req.Cost > 0 {
		rep.Note = fmt.Sprintf("no %s was recorded in the range: the cost of %.2f %s is split among no tenant", measure, rep.Total.Cost, req.Currency)
	}
	if req.Tenant != "" {
		rep.OnlyTenant(req.Tenant)
	}
	if len(rep.Lines) == 0 {
		rep.Lines = []CostLine{}
	}
	return rep, nil
}

// AddNote adds n ("": nothing) to the report's note, after what it says.
func (rep *CostReport) AddNote(n string) {
	if n != "" && rep.Note != "" {
		rep.Note += "; "
	}
	rep.Note += n
}

// OnlyTenant keeps the lines of tenant t alone (its routes, by route):
// each keeps its share and cost of the whole report, and the total sums
// the lines kept, so one tenant's bill is its part of everyone's.
func (rep *CostReport) OnlyTenant(t string) {
	rep.Lines = slices.DeleteFunc(rep.Lines, func(l CostLine) bool { return l.Tenant != t })
	total := CostLine{Tenant: TotalLine}
	var cents float64
	for _, l := range rep.Lines {
		addSat(&total.Requests, l.Requests)
		addSat(&total.Errors, l.Errors)
		total.DBSeconds = finiteSum(total.DBSeconds, l.DBSeconds)
		total.RU = finiteSum(total.RU, l.RU)
		addSat(&total.Bytes, l.Bytes)
		total.Share += l.Share
		cents += math.Round(l.Cost * 100)
	}
	total.Cost = cents / 100
	rep.Total = total
}

// TotalLine names the total line of a cost report: in parentheses, as no
// tenant's name can be, so that a tenant called "total" is never read as
// the sum of the others.
const TotalLine = "(total)"

// MaxReportCost bounds the shared cost a report splits: a trillion is
// beyond any bill, and keeps every cent exact in a float64.
const MaxReportCost = 1e12

// wholeMinutes takes both bounds back to the start of their minute (UTC):
// the store keeps whole minutes, so a report counts the minutes from the
// one holding from up to the one holding to, that one excluded — and
// says so. Two reports that share a bound count each minute once, and a
// report to now leaves out the minute still open. A range within one
// minute holds none and is refused.
func wholeMinutes(from, to time.Time) (time.Time, time.Time, error) {
	f, t := from.UTC().Truncate(time.Minute), to.UTC().Truncate(time.Minute)
	if !f.Before(t) {
		return f, t, fmt.Errorf("%w: range %s – %s holds no whole minute: the store keeps minutes, and a report counts those from the one holding from to the one holding to, excluded", ErrReport, from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	}
	return f, t, nil
}

// splitCost gives each line its part of cost, in whole cents, so that the
// parts add up to the cost to the cent, as a bill must, and, by route, a
// tenant's routes add up to the tenant's part: the cents are first split
// between tenants (a tenant's share is the sum of its lines'), then each
// tenant's between its routes, both by largest remainder (apportion). So a
// tenant's routes sum to what a report by tenant bills it. It returns the
// cost so split, rounded to the cent.
func splitCost(lines []CostLine, cost float64) float64 {
	cents := math.Round(cost * 100)
	var tenants []string // in the lines' order
	of := map[string][]int{}
	for i, l := range lines {
		if of[l.Tenant] == nil {
			tenants = append(tenants, l.Tenant)
		}
		of[l.Tenant] = append(of[l.Tenant], i)
	}
	shares := make([]float64, len(tenants))
	for k, t := range tenants {
		for _, i := range of[t] {
			shares[k] += lines[i].Share
		}
	}
	for k, part := range apportion(cents, shares) {
		idx := of[tenants[k]]
		routes := make([]float64, len(idx))
		for j, i := range idx {
			routes[j] = lines[i].Share
		}
		for j, c := range apportion(part, routes) {
			lines[idx[j]].Cost = c / 100
		}
	}
	return cents / 100
}

// apportion splits n whole units in proportion to weights, by largest
// remainder (Hamilton's method): each weight gets the whole units of its
// exact part, and the units left over go one each to the weights with the
// largest fractions left (the earlier on a tie). The parts add up to n
// exactly when some weight is above zero; a weight of zero gets nothing.
func apportion(n float64, weights []float64) []float64 {
	parts := make([]float64, len(weights))
	var sum float64
	for _, w := range weights {
		sum += max(w, 0)
	}
	if !(sum > 0) {
		return parts
	}
	type rest struct {
		i    int
		frac float64
	}
	var given float64
	var rests []rest
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		exact := n * (w / sum)
		parts[i] = math.Floor(exact)
		given += parts[i]
		rests = append(rests, rest{i, exact - parts[i]})
	}
	slices.SortStableFunc(rests, func(a, b rest) int { return cmp.Compare(b.frac, a.frac) })
	for k := 0; given < n; k = (k + 1) % len(rests) {
		parts[rests[k].i]++
		given++
	}
	// Float error in the exact parts of a huge n (a trillion's cents
	// over thousands of lines) may give a unit too many: it comes back
	// from the smallest fractions.
	for k := len(rests) - 1; given > n; k = (k + len(rests) - 1) % len(rests) {
		if parts[rests[k].i] > 0 {
			parts[rests[k].i]--
			given--
		}
	}
	return parts
}

type costKey struct{ tenant, route string }

// costLines sums the usage rows per tenant (and route), untagged usage
// on the unattributed line.
func costLines(us []store.Usage) map[costKey]*CostLine {
	acc := make(map[costKey]*CostLine)
	for _, u := range us {
		t := u.Tenant
		unattr := untaggedTenant(t)
		if unattr {
			t = Unattributed
		}
		k := costKey{t, u.Route}
		l := acc[k]
		if l == nil {
			l = &CostLine{Tenant: t, Route: u.Route, Unattributed: unattr}
			acc[k] = l
		}
		addSat(&l.Requests, u.Requests)
		addSat(&l.Errors, u.Errors)
		l.DBSeconds = finiteSum(l.DBSeconds, u.DBSeconds)
		l.RU = finiteSum(l.RU, u.RU)
		addSat(&l.Bytes, u.Bytes)
	}
	return acc
}

// untaggedTenant reports a tenant name that stands for no tenant tag: the
// unattributed line of a cost report.
func untaggedTenant(t string) bool { return t == "" || t == report.UnknownTenant }

// sortCostLines orders the lines by share, the unattributed line last.
func sortCostLines(lines []CostLine) {
	slices.SortFunc(lines, func(a, b CostLine) int {
		if a.Unattributed != b.Unattributed {
			if a.Unattributed {
				return 1
			}
			return -1
		}
		if a.Share != b.Share {
			if a.Share > b.Share {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.Tenant, b.Tenant); c != 0 {
			return c
		}
		return strings.Compare(a.Route, b.Route)
	})
}

// Formats of a cost report.
const (
	FormatTable = "table"
	FormatCSV   = "csv"
	FormatJSON  = "json"
)

// Write writes the report in format (FormatTable, FormatCSV, FormatJSON).
func (r *CostReport) Write(w io.Writer, format string, byRoute bool) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatCSV:
		cw := csv.NewWriter(w)
		head := []string{"tenant"}
		if byRoute {
			head = append(head, "route")
		}
		head = append(head, "requests", "errors", "db_seconds", "ru", "bytes", "share", "cost")
		cw.Write(head)
		for _, l := range append(append([]CostLine{}, r.Lines...), r.Total) {
			rec := []string{csvSafe(l.Tenant)}
			if byRoute {
				rec = append(rec, csvSafe(l.Route))
			}
			rec = append(rec, strconv.FormatUint(l.Requests, 10), strconv.FormatUint(l.Errors, 10),
				strconv.FormatFloat(l.DBSeconds, 'f', 3, 64), strconv.FormatFloat(l.RU, 'f', 3, 64),
				strconv.FormatUint(l.Bytes, 10), strconv.FormatFloat(l.Share, 'f', 6, 64),
				strconv.FormatFloat(l.Cost, 'f', 2, 64))
			cw.Write(rec)
		}
		cw.Flush()
		return cw.Error()
	case FormatTable, "":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(w, "Usage %s – %s, split by %s", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.Measure)
		if r.Cost > 0 {
			fmt.Fprintf(w, ", shared cost %.2f %s", r.Cost, r.Currency)
		}
		fmt.Fprintln(w)
		if r.Note != "" {
			fmt.Fprintln(w, "Note: "+r.Note)
		}
		head := "TENANT\t"
		if byRoute {
			head += "ROUTE\t"
		}
		head += "REQUESTS\tERRORS\tDB TIME (s)\tRU\tBYTES\tSHARE\t"
		if r.Cost > 0 {
			head += "COST\t"
		}
		fmt.Fprintln(tw, head)
		for _, l := range append(append([]CostLine{}, r.Lines...), r.Total) {
			line := printable(l.Tenant) + "\t"
			if byRoute {
				line += printable(l.Route) + "\t"
			}
			line += fmt.Sprintf("%d\t%d\t%.1f\t%.1f\t%d\t%.2f%%\t", l.Requests, l.Errors, l.DBSeconds, l.RU, l.Bytes, 100*l.Share)
			if r.Cost > 0 {
				line += fmt.Sprintf("%.2f %s\t", l.Cost, r.Currency)
			}
			fmt.Fprintln(tw, line)
		}
		return tw.Flush()
	}
	return fmt.Errorf("%w: format %q: want table, csv or json", ErrReport, clip(format))
}

// csvSafe keeps a tenant name from being read as a formula by a
// spreadsheet: a name that starts with = + - @, a tab or a carriage
// return gets a leading apostrophe. So does one that starts with an
// apostrophe, so that tenants "=x" and "'=x" stay two names in the sheet.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r'", rune(s[0])) {
		return "'" + s
	}
	return s
}

// printable replaces control characters (C0, DEL, C1) and bidirectional
// controls so a tenant name or route cannot move the terminal's cursor,
// reorder the line or break the table.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return '?'
		}
		return r
	}, s)
}

// maxEcho bounds how much of a value a request sent an error message
// quotes back.
const maxEcho = 64

// clip returns s, or its first maxEcho bytes (whole characters) and "…",
// for quoting a request's value in an error message.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	n := maxEcho
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// maxCurrencyLen bounds a cost report's currency, in characters.
const maxCurrencyLen = 16

// validCurrency reports whether c is 1 to maxCurrencyLen letters or
// currency signs ("USD", "€", "EUR").
func validCurrency(c string) bool {
	n := 0
	for _, r := range c {
		if n++; n > maxCurrencyLen || !unicode.IsLetter(r) && !unicode.Is(unicode.Sc, r) {
			return false
		}
	}
	return n > 0 // a byte that is not UTF-8 reads as U+FFFD, neither
}

// readOnly answers a request with a method other than GET or HEAD with
// 405 and an Allow header, as the package's other handlers do; it
// reports whether the handler may go on.
func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "use GET or HEAD", 0)
	return false
}

// handleCostReport is GET /v1/report?from=…&to=…&by=tenant|tenant,route&measure=…&cost=…&currency=…&format=json|csv|table&tenant=….
func (s httpAPI) handleCostReport(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	if s.em.store == nil {
		writeError(w, http.StatusServiceUnavailable, ErrNoStore.Error(), 0)
		return
	}
	q, err := reportParams(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	req, format, err := ParseReportQuery(q.Get("from"), q.Get("to"), q.Get("by"), q.Get("measure"), q.Get("cost"), q.Get("currency"), q.Get("format"), q.Get("tenant"), s.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	s.mu.Lock()
	first := s.minutes.unwrittenFrom(s.cfg.Now())
	s.mu.Unlock()
	if !first.IsZero() && first.Before(req.To) && first.Add(time.Minute).After(req.From) {
		// Its rows are not in the store yet: a report now would leave
		// them out without a word.
		retry := max(first.Add(time.Minute+s.cfg.Grace).Sub(s.cfg.Now()), time.Second)
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the minute of %s has ended and is not written yet (the collector writes a minute %v after its end): ask again, or end the report at that minute (to=%s)",
			first.UTC().Format(time.RFC3339), s.cfg.Grace, first.UTC().Format(time.RFC3339)), retry)
		return
	}
	rep, err := BuildRetainedReport(r.Context(), s.em.store, req, s.cfg.Retention, s.cfg.Now(), nil)
	if open := s.cfg.Now().UTC().Truncate(time.Minute); err == nil && req.To.Truncate(time.Minute).After(open) {
		// Not recorded yet: a report "to" midnight asked at 09:00 is
		// not the whole day, and says so.
		rep.AddNote(fmt.Sprintf("the minutes from %s (the one open now) on are not recorded yet and count nothing here (end the report at %s, or ask again once they are written)",
			open.Format(time.RFC3339), open.Format(time.RFC3339)))
	}
	if err != nil {
		status, retry := http.StatusInternalServerError, time.Duration(0)
		switch {
		case errors.Is(err, ErrReport):
			status = http.StatusBadRequest
		case storeReadIncomplete(err):
			status, retry = http.StatusServiceUnavailable, storeReadRetry
		}
		writeError(w, status, err.Error(), retry)
		return
	}
	if rep.Note != "" {
		w.Header().Set(NoteHeader, rep.Note) // a CSV has no place for it
	}
	switch format {
	case FormatCSV:
		w.Header().Set("Content-Type", "text/csv")
	case FormatTable:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/json")
	}
	rep.Write(w, format, req.ByRoute)
}

// NoteHeader carries a cost report's note (CostReport.Note) in the reply
// of GET /v1/report, in every format: a CSV has no place for it.
const NoteHeader = "Qtop-Report-Note"

// reportParamNames are the parameters of GET /v1/report.
var reportParamNames = []string{"from", "to", "by", "measure", "cost", "currency", "format", "tenant"}

// reportParams reads the query of GET /v1/report strictly (strictQuery).
func reportParams(raw string) (url.Values, error) {
	q, err := strictQuery(raw, reportParamNames)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrReport, err)
	}
	return q, nil
}

// strictQuery reads a query strictly: a pair that does not decode, a
// parameter not in names (a filter the endpoint does not have, such as
// tenant= on the live view, or a misspelt one) or one given twice is
// refused, rather than dropped or read as the first of several, which
// would answer with something other than what was asked for.
func strictQuery(raw string, names []string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("query does not decode: %s", clip(err.Error()))
	}
	keys := slices.Sorted(maps.Keys(q))
	for _, k := range keys {
		switch {
		case len(names) == 0:
			return nil, fmt.Errorf("unknown parameter %q: this endpoint takes none", clip(k))
		case !slices.Contains(names, k):
			return nil, fmt.Errorf("unknown parameter %q: want %s", clip(k), strings.Join(names, ", "))
		}
	}
	for _, k := range keys {
		if n := len(q[k]); n > 1 {
			return nil, fmt.Errorf("parameter %q given %d times: give it once", k, n)
		}
	}
	return q, nil
}

// ParseTime reads a report bound: RFC 3339, a date (YYYY-MM-DD, UTC), or a
// duration before now ("24h", "7d").
func ParseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("%w: empty time", ErrReport)
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	if strings.HasSuffix(s, "d") {
		if n, err := strconv.Atoi(strings.TrimSuffix(s, "d")); err == nil && n >= 0 {
			if n > maxAgeDays {
				return time.Time{}, fmt.Errorf("%w: age %q: at most %dd", ErrReport, clip(s), maxAgeDays)
			}
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if s == "now" {
		return now, nil
	}
	return time.Time{}, fmt.Errorf("%w: time %q: want RFC 3339, YYYY-MM-DD, now, or an age like 24h or 7d", ErrReport, clip(s))
}

// ParseReportQuery reads the options of a cost report as the command line
// and GET /v1/report spell them. A tenant ("" for every tenant) must be a
// valid name (tenant.ValidateTenant); "other" is the tenant of that name,
// stored under its stand-in (tenant.Escape), not the overflow row.
func ParseReportQuery(from, to, by, measure, cost, currency, format, tenantName string, now time.Time) (ReportRequest, string, error) {
	var req ReportRequest
	var err error
	if tenantName != "" {
		if err := tenant.ValidateTenant(tenantName); err != nil {
			return req, "", fmt.Errorf("%w: %v", ErrReport, err)
		}
		req.Tenant = tenant.Escape(tenantName)
	}
	if from == "" {
		from = "24h"
	}
	if to == "" {
		to = "now"
	}
	if req.From, err = ParseTime(from, now); err != nil {
		return req, "", err
	}
	if req.To, err = ParseTime(to, now); err != nil {
		return req, "", err
	}
	if req.From.After(now) {
		return req, "", fmt.Errorf("%w: from %s is in the future (now is %s): nothing is recorded there yet", ErrReport, req.From.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if err := checkRange(req.From, req.To); err != nil {
		return req, "", err
	}
	switch by {
	case "", "tenant":
	case "tenant,route":
		req.ByRoute = true
	default:
		return req, "", fmt.Errorf("%w: by %q: want tenant or tenant,route", ErrReport, clip(by))
	}
	if req.Measure, err = ParseMeasure(measure); err != nil {
		return req, "", err
	}
	if cost != "" {
		if req.Cost, err = strconv.ParseFloat(cost, 64); err != nil || !(req.Cost >= 0 && req.Cost <= MaxReportCost) || strings.ContainsAny(cost, "xX_") {
			return req, "", fmt.Errorf("%w: cost %q: want a decimal number from 0 to %.0e", ErrReport, clip(cost), MaxReportCost)
		}
	}
	req.Currency = currency
	if req.Currency == "" {
		req.Currency = "USD"
	}
	if !validCurrency(req.Currency) {
		return req, "", fmt.Errorf("%w: currency %q: want 1 to %d letters or currency signs, such as USD or €", ErrReport, clip(req.Currency), maxCurrencyLen)
	}
	switch format {
	case "":
		format = FormatJSON
	case FormatJSON, FormatCSV, FormatTable:
	default:
		return req, "", fmt.Errorf("%w: format %q: want table, csv or json", ErrReport, clip(format))
	}
	return req, format, nil
}

// checkRange refuses a report range that is empty, longer than
// MaxReportRange, or outside what the stores keep (1970 to 2105).
func checkRange(from, to time.Time) error {
	switch {
	case !from.Before(to):
		return fmt.Errorf("%w: from %s is not before to %s", ErrReport, from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	case from.Unix() < 0 || to.Unix() >= 1<<32-1:
		return fmt.Errorf("%w: range %s – %s: the store keeps 1970 to 2105", ErrReport, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	case to.Sub(from) > MaxReportRange:
		return fmt.Errorf("%w: range of %v, at most %d days", ErrReport, to.Sub(from).Truncate(time.Hour), MaxReportRange/(24*time.Hour))
	}
	return nil
}
