package collector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/otlpin"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// dbTimes makes the stored database time of statement shapes PostgreSQL's
// own (with --postgres). A span measures a statement as its client saw
// it, the network and the client's own scheduling included: on statements
// of a few milliseconds that is tens of percent more than the server
// spent, and tenants of short statements would be billed more than
// tenants of long ones. So at every minute's turn the collector reads
// pg_stat_statements of the database it samples, sums each statement
// shape's growth over the minute (otlpin.StatementShape of its text: the
// route OTLP gives a statement span), and when a minute is written, the
// DB rows of each shape are scaled so that together they hold what
// PostgreSQL measured for it, split between tenants by their calls and
// what the clients measured (toPostgres): each row's calls at
// PostgreSQL's mean, moved by how far its time per call is from the
// shape's, as far as such differences exceed the clients' overhead per
// call. Tenants whose statements of one shape differ in length keep that
// difference, and the overhead of short statements (a service slowing
// some tenants' requests more than others') does not move a tenant's
// share; the shape's total is PostgreSQL's.
//
// A statement's span reaches the collector after PostgreSQL counted the
// statement (its export is seconds behind), sometimes in the next minute;
// and pg_stat_statements may count calls no rows hold (a client not
// traced, another collector's share of the spans). So a shape's rows of a
// minute are given PostgreSQL's time of as many calls as they hold, at
// its mean, out of the calls it counted and no rows took yet in the
// calibrationWindow minutes up to that one: all of it when the rows hold
// as many calls, or more (rows a moment ahead of PostgreSQL's read take
// the time of the calls beyond it from the minutes after, at their
// mean), and the rest is carried to the shape's next minute with rows. The bill's sum is
// PostgreSQL's, whatever minute the spans came in.
//
// A shape keeps the clients' time where its rows cannot be PostgreSQL's
// calls: more calls than PostgreSQL counted in the window and in the
// minutes after it read so far, beyond calibrationCallSlack (a second
// database running the same shape), counters that went back
// (pg_stat_statements_reset), or PostgreSQL's time over maxCalibration
// times the clients'. The agents' DB rows are by request route, not by
// shape, and are not touched.
//
// What it knows outlives the process (dbTimesFile in DataDir, saved after
// each read and after the minutes it scaled are written, before their
// write-ahead logs go): a collector killed mid-minute rebuilds the minute
// from its log, and the first read after the restart adds the growth
// since the last saved read to that minute, so it is scaled as if nothing
// had happened, and what minutes took is not given twice.
type dbTimes struct {
	path   string       // the state's file; "" keeps nothing
	source string       // which PostgreSQL the state is of (a hash of --postgres)
	log    *slog.Logger // save errors
	saveMu sync.Mutex   // one save at a time
	dirty  bool         // changed since the last save (mu)

	mu     sync.Mutex
	prev   map[int64]stmtCum // by queryid, at the last read
	prevAt time.Time
	pg     map[int64]map[string]shapeTotal // minute → shape → PostgreSQL's growth
	given  map[int64]map[string]grant      // minute → shape → what its rows were given
	result *prometheus.CounterVec
	// live holds the factors of the newest minute written, for the live
	// view (liveScale); liveAt is that minute.
	live   atomic.Pointer[map[string]float64]
	liveAt int64
}

// liveScale is the factor the newest written minute gave statement shape
// route (1 if none): the live view's DB time of a shape is scaled as its
// last minute was, so that it shows what the store will hold.
func (d *dbTimes) liveScale(route string) float64 {
	if m := d.live.Load(); m != nil {
		if f, ok := (*m)[route]; ok {
			return f
		}
	}
	return 1
}

type stmtCum struct {
	calls int64
	ms    float64
}

// shapeTotal is what a shape did in a minute; bad marks a minute whose
// counters went back (pg_stat_statements_reset). left is the part of it
// no minute's rows took yet (carried); its calls go below zero where rows
// took calls PostgreSQL had not counted by then.
type shapeTotal struct {
	calls   int64
	seconds float64
	left    grant
	bad     bool
}

// grant is PostgreSQL's time of some calls of a shape.
type grant struct {
	calls   int64
	seconds float64
}

const (
	// calibrationWindow: how many minutes PostgreSQL's time of calls no
	// rows took yet is kept for the rows that come later.
	calibrationWindow = 5
	// calibrationCallSlack: how many more calls than PostgreSQL counted
	// rows may hold, as a fraction (plus two calls).
	calibrationCallSlack = 0.03
	// maxCalibration: PostgreSQL's time of a shape over the clients' at
	// most this (more: the rows are not all of its calls).
	maxCalibration = 1.5
	// keepMinutes: how long a minute's totals are kept for re-emissions.
	keepMinutes = 15
)

// newDBTimes returns a dbTimes of the PostgreSQL at dsn that keeps its
// state in dir (none if empty), loaded from there if a collector kept it
// before for the same server, database and role: an unreadable file is
// reported and set aside, and the state starts afresh.
func newDBTimes(reg prometheus.Registerer, dir, dsn string, log *slog.Logger) (*dbTimes, error) {
	d := &dbTimes{log: log, source: statementSource(dsn),
		pg: make(map[int64]map[string]shapeTotal), given: make(map[int64]map[string]grant),
		result: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_db_time_shapes_total",
			Help: "Statement shapes of a written minute by what their DB time is: postgres (pg_stat_statements' time of their calls), calls_differ (more calls than PostgreSQL counted, or its counters went back) or implausible (PostgreSQL's time over 1.5 times the clients'): the clients' time kept."},
			[]string{"result"}),
	}
	if reg != nil {
		if err := reg.Register(d.result); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				d.result = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	if dir == "" {
		return d, nil
	}
	d.path = filepath.Join(dir, dbTimesFile)
	return d, d.load()
}

// read takes pg_stat_statements' totals at now.
func (d *dbTimes) read(ctx context.Context, pool *pgxpool.Pool, now time.Time) error {
	stats, err := pgactivity.ReadStatementTotals(ctx, pool)
	if err != nil {
		return err
	}
	d.observe(now, stats)
	return nil
}

// observe adds the growth since the last read to the minute that read was
// in: reads are made at each minute's turn, so that is the minute the
// statements ended in. A read that comes after more than a minute and a
// little (one missed) starts afresh.
func (d *dbTimes) observe(now time.Time, stats []pgactivity.StatementStats) {
	cur := make(map[int64]stmtCum, len(stats))
	shapes := make(map[int64]string, len(stats))
	for _, s := range stats {
		c := cur[s.QueryID] // one queryid per role: summed
		c.calls += s.Calls
		c.ms += s.TotalMs
		cur[s.QueryID] = c
		if _, ok := shapes[s.QueryID]; !ok {
			shapes[s.QueryID] = otlpin.StatementShape(s.Query)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty = true
	prev, m := d.prev, d.prevAt.Truncate(time.Minute)
	d.prev, d.prevAt = cur, now
	if prev == nil || now.Before(m) || now.Sub(m) > time.Minute+5*time.Second {
		return
	}
	tot := d.pg[m.Unix()]
	if tot == nil {
		tot = make(map[string]shapeTotal)
		d.pg[m.Unix()] = tot
	}
	for id, c := range cur {
		sh := shapes[id]
		if sh == "" {
			continue
		}
		p := prev[id] // absent: new since the last read, all of it is growth
		t := tot[sh]
		if c.calls < p.calls || c.ms < p.ms {
			t.bad = true
		} else {
			t.calls += c.calls - p.calls
			t.seconds += (c.ms - p.ms) / 1000
			t.left.calls += c.calls - p.calls
			t.left.seconds += (c.ms - p.ms) / 1000
		}
		tot[sh] = t
	}
	for k := range d.pg {
		if k < m.Unix()-keepMinutes*60 {
			delete(d.pg, k)
			delete(d.given, k)
		}
	}
}

// calibrate scales the DB rows of minute's rollups shape by shape to
// PostgreSQL's time, where it can (see dbTimes).
func (d *dbTimes) calibrate(minute time.Time, rollups []store.Rollup) {
	client := make(map[string]shapeTotal)
	for i := range rollups {
		if r := &rollups[i]; r.Kind == report.KindDB.String() && r.Route != "" {
			t := client[r.Route]
			t.calls += int64(min(r.Count, math.MaxInt64/2))
			t.seconds += r.DurationSeconds
			client[r.Route] = t
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := minute.Unix()
	pg := d.pg[k]
	if pg == nil {
		return
	}
	d.dirty = true
	shapes := make(map[string]float64) // PostgreSQL's seconds given to the shapes scaled
	for sh, c := range client {
		avail, ok := d.available(k, sh)
		if !ok {
			continue
		}
		result, give, borrow := "postgres", grant{c.calls, avail.seconds}, grant{}
		switch {
		case d.reset(k, sh):
			result = "calls_differ"
		case c.calls > avail.calls+callSlack(c.calls, avail.calls)+d.borrow(k, sh, math.MaxInt64, false).calls:
			result = "calls_differ"
		default:
			if c.calls < avail.calls {
				give.seconds = avail.seconds * float64(c.calls) / float64(avail.calls)
			} else if c.calls > avail.calls {
				// Calls PostgreSQL counted in a later minute: their time
				// comes from there.
				borrow = d.borrow(k, sh, c.calls-avail.calls, false)
				give.seconds += borrow.seconds
			}
			if f := give.seconds / c.seconds; c.seconds <= 0 || c.calls <= 0 || !(f > 0 && f <= maxCalibration) {
				result = "implausible"
			}
		}
		d.result.WithLabelValues(result).Inc()
		if result != "postgres" { // PostgreSQL's time up to here is spent
			d.take(k, sh, grant{}, nil)
			continue
		}
		// What the rows did not take stays, less the calls they held
		// beyond PostgreSQL's count (owed by the next minute's).
		d.borrow(k, sh, borrow.calls, true)
		d.take(k, sh, grant{avail.calls + borrow.calls - c.calls, avail.seconds + borrow.seconds - give.seconds}, &give)
		shapes[sh] = give.seconds
	}
	live := make(map[string]float64, len(shapes))
	for sh, secs := range shapes {
		live[sh] = toPostgres(rollups, sh, secs, client[sh])
	}
	if k >= d.liveAt { // not an older minute written again
		d.liveAt = k
		d.live.Store(&live)
	}
}

// callSlack is how many calls rows may hold beyond PostgreSQL's count
// before they cannot all be its calls.
func callSlack(rows, pg int64) int64 {
	return 2 + int64(calibrationCallSlack*float64(max(rows, pg)))
}

// toPostgres scales the DB rows of shape sh to pgSeconds together. The
// clients' time of a row is its statements' time plus their own overhead
// per call (the network, the client's queues and scheduling), which
// PostgreSQL does not count. So a row is given its calls at PostgreSQL's
// mean per call (m̄ = pgSeconds ÷ calls), moved by λ times how far its
// own time per call is from the shape's (s_i − s̄): m_i = m̄ + λ(s_i − s̄).
// λ = 1 takes the same overhead off every call (o = s̄ − m̄); λ = 0 is the
// calls alone; either way the rows sum to pgSeconds. Which is right
// depends on where the rows' differences come from. Where their times
// per call spread far beyond the overhead (R = the widest gap between two
// rows' times per call, R ≫ o: one tenant's 500 ms statements beside
// another's 2 ms ones in one shape), the statements differ, and λ is near
// 1; where they spread less than it (the same 2 ms statements, queued
// longer for one tenant than another), it is the overhead that differs,
// and λ is near 0. So λ = R ÷ (R + o). Rows with fewer than minShapeCalls
// calls do not set R (a pause on a single call is not a statement
// difference). A row that comes out below 0 is given 0, and the rest
// scaled to pgSeconds. Where PostgreSQL measured as much as the clients or
// more (no overhead to take off), each row keeps its part of what they
// measured. (Taking off the same overhead everywhere, λ = 1, was tried
// alone: on short statements of one kind a tenant's share swung by 50% on
// requests 10% slower than the others'; scaling every row alike moved a
// long-statement tenant's time to the short-statement tenants of its
// shape.) factor is pgSeconds over the clients' seconds, the shape's own
// scale.
func toPostgres(rollups []store.Rollup, sh string, pgSeconds float64, c shapeTotal) (factor float64) {
	k := pgSeconds / c.seconds
	var rows []*store.Rollup
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range rollups {
		if r := &rollups[i]; r.Kind == report.KindDB.String() && r.Route == sh {
			rows = append(rows, r)
			if r.Count >= minShapeCalls {
				per := r.DurationSeconds / float64(r.Count)
				lo, hi = min(lo, per), max(hi, per)
			}
		}
	}
	calls := float64(c.calls)
	mean, spans := pgSeconds/calls, c.seconds/calls
	o, spread := spans-mean, max(hi-lo, 0)
	if o <= 0 || math.IsInf(lo, 0) {
		for _, r := range rows {
			r.DurationSeconds *= k
		}
		return k
	}
	lambda := spread / (spread + o)
	var sum float64
	for _, r := range rows {
		n := float64(min(r.Count, math.MaxInt64/2))
		if n == 0 {
			r.DurationSeconds = 0
			continue
		}
		r.DurationSeconds = n * max(mean+lambda*(r.DurationSeconds/n-spans), 0)
		sum += r.DurationSeconds
	}
	for _, r := range rows {
		r.DurationSeconds *= pgSeconds / sum // sum > 0: the rows' calls at mean and above sum to pgSeconds
	}
	return k
}

// minShapeCalls: a row with fewer calls does not tell how far a shape's
// statements differ in length (toPostgres).
const minShapeCalls = 5

// available is PostgreSQL's time of shape sh's calls that minute k's rows
// may take: what an earlier emission of the minute gave them, and what no
// rows took yet of the calibrationWindow minutes up to k. ok is false
// where PostgreSQL counted none of sh there. The lock is held.
func (d *dbTimes) available(k int64, sh string) (g grant, ok bool) {
	g, ok = d.given[k][sh]
	for i := range int64(calibrationWindow) {
		if t, had := d.pg[k-60*i][sh]; had {
			g.calls += t.left.calls
			g.seconds += t.left.seconds
			ok = true
		}
	}
	return g, ok
}

// take records that minute k's rows of shape sh took PostgreSQL's time up
// to minute k but rest, which stays (in minute k's left), and were given
// gave (nil: nothing). The lock is held.
func (d *dbTimes) take(k int64, sh string, rest grant, gave *grant) {
	for i := range int64(calibrationWindow) {
		if tot := d.pg[k-60*i]; tot != nil {
			if t, had := tot[sh]; had || i == 0 {
				t.left = grant{}
				if i == 0 {
					t.left = rest
				}
				tot[sh] = t
			}
		}
	}
	if gave == nil {
		delete(d.given[k], sh)
		return
	}
	if d.given[k] == nil {
		d.given[k] = make(map[string]grant)
	}
	d.given[k][sh] = *gave
}

// reset reports whether shape sh's counters went back in a minute of the
// calibrationWindow up to k. The lock is held.
func (d *dbTimes) reset(k int64, sh string) bool {
	for i := range int64(calibrationWindow) {
		if d.pg[k-60*i][sh].bad {
			return true
		}
	}
	return false
}

// borrow is up to n of the calls of shape sh that PostgreSQL counted in
// the minutes after k (read so far) and no rows took yet, earliest first,
// with their time at each minute's mean; with take it takes them. The
// lock is held.
func (d *dbTimes) borrow(k int64, sh string, n int64, take bool) grant {
	var g grant
	for m := k + 60; n > g.calls; m += 60 {
		tot, ok := d.pg[m]
		if !ok {
			if m > d.prevAt.Unix() {
				break
			}
			continue
		}
		t := tot[sh]
		if t.left.calls <= 0 {
			continue
		}
		c := min(n-g.calls, t.left.calls)
		secs := t.left.seconds * float64(c) / float64(t.left.calls)
		g.calls += c
		g.seconds += secs
		if take {
			t.left.calls -= c
			t.left.seconds -= secs
			tot[sh] = t
		}
	}
	return g
}

// clock reads pg_stat_statements at the start and at every minute's turn
// until ctx ends, then once more (the open minute's part, for the last
// emission), with now for the time.
func (d *dbTimes) clock(ctx context.Context, pool *pgxpool.Pool, now func() time.Time, onErr func(error)) {
	readAt := func(c context.Context) {
		if err := d.read(c, pool, now()); err != nil && onErr != nil && c.Err() == nil {
			onErr(err)
		}
		d.save()
	}
	readAt(ctx)
	for {
		t := now()
		next := t.Truncate(time.Minute).Add(time.Minute)
		timer := time.NewTimer(next.Sub(t))
		select {
		case <-ctx.Done():
			timer.Stop()
			last, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			readAt(last)
			cancel()
			return
		case <-timer.C:
			readAt(ctx)
		}
	}
}

// statementSource names the counters a dsn reads, for the state's file:
// a hash of its host, port, database and role (not of its password, which
// the file must not help to guess).
func statementSource(dsn string) string {
	id := "unparsed"
	if c, err := pgconn.ParseConfig(dsn); err == nil {
		id = fmt.Sprintf("%s:%d/%s@%s", c.Host, c.Port, c.Database, c.User)
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}

// dbTimesFile is where dbTimes keeps its state in DataDir.
const dbTimesFile = "pg-statements.json"

// dbTimesState is dbTimes as kept in its file: the last read's counters
// and every minute's totals, what is left of them and what minutes were
// given (floats in JSON's shortest exact form, so a minute scaled again
// after a restart gets the same time to the bit).
type dbTimesState struct {
	Format  int                             `json:"format"`
	Source  string                          `json:"source"`
	PrevAt  time.Time                       `json:"prev_at"`
	Prev    map[int64]stmtCum               `json:"prev"`
	Minutes map[int64]map[string]shapeTotal `json:"minutes"`
	Given   map[int64]map[string]grant      `json:"given"`
	LiveAt  int64                           `json:"live_at"`
	Live    map[string]float64              `json:"live,omitempty"`
}

const dbTimesFormat = 1

// The file's forms of the state's values.
type (
	savedCum struct {
		Calls int64   `json:"calls"`
		Ms    float64 `json:"ms"`
	}
	savedGrant struct {
		Calls   int64   `json:"calls"`
		Seconds float64 `json:"seconds"`
	}
	savedTotal struct {
		Calls   int64   `json:"calls"`
		Seconds float64 `json:"seconds"`
		Left    grant   `json:"left"`
		Bad     bool    `json:"bad,omitempty"`
	}
)

func (c stmtCum) MarshalJSON() ([]byte, error) { return json.Marshal(savedCum{c.calls, c.ms}) }

func (c *stmtCum) UnmarshalJSON(b []byte) error {
	var v savedCum
	err := json.Unmarshal(b, &v)
	*c = stmtCum{v.Calls, v.Ms}
	return err
}

func (g grant) MarshalJSON() ([]byte, error) { return json.Marshal(savedGrant{g.calls, g.seconds}) }

func (g *grant) UnmarshalJSON(b []byte) error {
	var v savedGrant
	err := json.Unmarshal(b, &v)
	*g = grant{v.Calls, v.Seconds}
	return err
}

func (t shapeTotal) MarshalJSON() ([]byte, error) {
	return json.Marshal(savedTotal{t.calls, t.seconds, t.left, t.bad})
}

func (t *shapeTotal) UnmarshalJSON(b []byte) error {
	var v savedTotal
	err := json.Unmarshal(b, &v)
	*t = shapeTotal{calls: v.Calls, seconds: v.Seconds, left: v.Left, bad: v.Bad}
	return err
}

// load reads the state a collector kept in d.path, if any. A file that
// cannot be read is renamed aside (*.bad) so that it is not read again,
// and the state starts afresh: the minutes rebuilt then keep their
// clients' time, as without the file.
func (d *dbTimes) load() error {
	b, err := os.ReadFile(d.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("collector: %s: %w", dbTimesFile, err)
	}
	var st dbTimesState
	if err = json.Unmarshal(b, &st); err == nil && st.Format != dbTimesFormat {
		err = fmt.Errorf("format %d, this collector reads %d", st.Format, dbTimesFormat)
	}
	if err != nil {
		os.Rename(d.path, d.path+".bad")
		return fmt.Errorf("collector: %s set aside as %s.bad, pg_stat_statements' totals start afresh: %w", dbTimesFile, dbTimesFile, err)
	}
	if st.Source != d.source { // another database's counters: their growth would be nonsense
		if d.log != nil {
			d.log.Info("pg_stat_statements' totals kept were of another --postgres; starting afresh", "file", dbTimesFile)
		}
		return nil
	}
	d.prevAt, d.prev, d.liveAt = st.PrevAt, st.Prev, st.LiveAt
	if st.Minutes != nil {
		d.pg = st.Minutes
	}
	if st.Given != nil {
		d.given = st.Given
	}
	if st.Live != nil {
		d.live.Store(&st.Live)
	}
	return nil
}

// save writes the state to d.path if it changed since the last save: a
// copy is taken under the lock, written to a temporary file, synced and
// renamed over the old one.
func (d *dbTimes) save() {
	if d == nil || d.path == "" {
		return
	}
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	d.mu.Lock()
	if !d.dirty {
		d.mu.Unlock()
		return
	}
	st := d.stateLocked()
	d.dirty = false
	d.mu.Unlock()
	b, err := json.Marshal(st)
	if err == nil {
		err = store.WriteFileAtomic(d.path, b)
	}
	if err != nil {
		d.mu.Lock()
		d.dirty = true
		d.mu.Unlock()
		if d.log != nil {
			d.log.Warn("pg_stat_statements' totals not saved: a collector killed now would keep its clients' DB time for the minutes it rebuilds", "err", err)
		}
	}
}

func (d *dbTimes) stateLocked() dbTimesState {
	st := dbTimesState{Format: dbTimesFormat, Source: d.source, PrevAt: d.prevAt, LiveAt: d.liveAt,
		Prev: maps.Clone(d.prev), Minutes: cloneNested(d.pg), Given: cloneNested(d.given)}
	if m := d.live.Load(); m != nil {
		st.Live = *m // never changed once stored
	}
	return st
}

// cloneNested copies a map of maps.
func cloneNested[K1, K2 comparable, V any](m map[K1]map[K2]V) map[K1]map[K2]V {
	out := make(map[K1]map[K2]V, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}
