package tui

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
)

// pgTopSQL bounds what qtop --postgres reads of pg_stat_statements and
// shows of it; pgTenantsPerQuery bounds the tenants kept per query id.
const (
	pgTopSQLRead      = 500
	pgTopSQL          = 50
	pgTenantsPerQuery = 5
	pgQueryIDs        = 2000
)

// stmtKey is a pg_stat_statements fingerprint in one database (the
// entries of several roles summed).
type stmtKey struct {
	id int64
	db string
}

// pgServer turns the server's counters and pg_stat_statements' into rates
// per second between two samples, and remembers which tenants the
// sampler saw running each query id. It is pure: the Postgres source
// reads, pgServer computes.
type pgServer struct {
	first, prev pgactivity.ServerStats
	stmts       map[stmtKey]pgactivity.StatementStats
	stmtsAt     time.Time
	tenants     map[int64][]string // query id → tenants seen, most recent last
}

// see records the tenants running each query id in a sample.
func (p *pgServer) see(bs []pgactivity.Backend) {
	if p.tenants == nil {
		p.tenants = map[int64][]string{}
	}
	for i := range bs {
		b := &bs[i]
		if b.QueryID == 0 || b.Tenant == "" || (len(p.tenants) >= pgQueryIDs && p.tenants[b.QueryID] == nil) {
			continue
		}
		ts := slices.DeleteFunc(p.tenants[b.QueryID], func(t string) bool { return t == b.Tenant })
		ts = append(ts, b.Tenant)
		p.tenants[b.QueryID] = ts[max(len(ts)-pgTenantsPerQuery, 0):]
	}
}

// server returns the header: rates since the previous read.
func (p *pgServer) server(cur pgactivity.ServerStats) *api.ServerRow {
	r := &api.ServerRow{Active: cur.Active, Idle: cur.Idle, IdleInTx: cur.IdleInTx, Waiting: cur.Waiting,
		Database: cur.Database, SizeBytes: cur.SizeBytes, CacheHitRatio: -1}
	if p.first.Time.IsZero() {
		p.first = cur
	}
	if prev := p.prev; !prev.Time.IsZero() {
		if dt := cur.Time.Sub(prev.Time).Seconds(); dt > 0 {
			r.TPS = float64(cur.Xacts-prev.Xacts) / dt
		}
		hit, read := cur.BlksHit-prev.BlksHit, cur.BlksRead-prev.BlksRead
		if hit+read > 0 {
			r.CacheHitRatio = float64(hit) / float64(hit+read)
		}
	}
	if dt := cur.Time.Sub(p.first.Time).Seconds(); dt > 0 && cur.Database == p.first.Database {
		r.GrowthBytesPerSec = float64(cur.SizeBytes-p.first.SizeBytes) / dt
	}
	p.prev = cur
	return r
}

// topSQL returns the deltas per second of the statements read at at,
// most execution time first; the first read has none.
func (p *pgServer) topSQL(cur []pgactivity.StatementStats, at time.Time) []api.TopSQLRow {
	now := map[stmtKey]pgactivity.StatementStats{}
	for _, s := range cur {
		k := stmtKey{s.QueryID, s.Database}
		o, ok := now[k]
		if ok {
			s.Calls, s.Rows, s.TotalMs = s.Calls+o.Calls, s.Rows+o.Rows, s.TotalMs+o.TotalMs
			s.SharedHit, s.SharedRead = s.SharedHit+o.SharedHit, s.SharedRead+o.SharedRead
		}
		now[k] = s
	}
	prev, dt := p.stmts, at.Sub(p.stmtsAt).Seconds()
	p.stmts, p.stmtsAt = now, at
	if prev == nil || dt <= 0 {
		return nil
	}
	var rows []api.TopSQLRow
	for k, s := range now {
		o, ok := prev[k]
		if !ok { // new since, or below the top before: no delta known
			continue
		}
		calls := s.Calls - o.Calls
		if calls <= 0 || s.TotalMs < o.TotalMs { // idle, or reset
			continue
		}
		r := api.TopSQLRow{QueryID: k.id, Database: k.db, Query: s.Query,
			CallsPerSec: float64(calls) / dt, TimeMsPerSec: (s.TotalMs - o.TotalMs) / dt, MeanMs: (s.TotalMs - o.TotalMs) / float64(calls),
			RowsPerSec: float64(s.Rows-o.Rows) / dt, SharedHitPerSec: float64(s.SharedHit-o.SharedHit) / dt,
			SharedReadPerSec: float64(s.SharedRead-o.SharedRead) / dt}
		r.Tenants = slices.Clone(p.tenants[k.id])
		slices.Sort(r.Tenants)
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b api.TopSQLRow) int {
		return cmp.Or(cmp.Compare(b.TimeMsPerSec, a.TimeMsPerSec), cmp.Compare(a.QueryID, b.QueryID), cmp.Compare(a.Database, b.Database))
	})
	return rows[:min(len(rows), pgTopSQL)]
}

// apply adds what r read to out: the header and the top SQL, or why not.
func (p *pgServer) apply(out *api.Snapshot, r serverRead, now time.Time) {
	if r.statsErr == nil && !r.stats.Time.IsZero() {
		out.Server = p.server(r.stats)
	}
	if r.stmtsErr != nil {
		out.TopSQLError = r.stmtsErr.Error()
		return
	}
	out.TopSQL = p.topSQL(r.stmts, now)
}

// serverLine is the header of qtop --postgres, as pg_activity's: TPS,
// sessions by state, cache hit ratio, database size and growth.
func serverLine(r *api.ServerRow) string {
	hit := "-"
	if r.CacheHitRatio >= 0 {
		hit = strconv.FormatFloat(r.CacheHitRatio*100, 'f', 1, 64) + "%"
	}
	growth := fmtBytes(r.GrowthBytesPerSec) + "/s"
	if r.GrowthBytesPerSec > 0 {
		growth = "+" + growth
	}
	return "pg " + fmtNum(r.TPS) + " TPS · " + strconv.Itoa(r.Active) + " active " + strconv.Itoa(r.IdleInTx) + " idle-in-tx " +
		strconv.Itoa(r.Waiting) + " waiting " + strconv.Itoa(r.Idle) + " idle · hit " + hit + " · " + clean(r.Database) + " " +
		fmtBytes(float64(r.SizeBytes)) + " " + growth
}

// fmtBytes is a size in B, kB, MB, GB or TB (powers of 1024).
func fmtBytes(v float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for ; i < len(units)-1 && (v >= 1024 || v <= -1024); i++ {
		v /= 1024
	}
	if i == 0 {
		return strconv.FormatFloat(v, 'f', 0, 64) + " " + units[i]
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}
