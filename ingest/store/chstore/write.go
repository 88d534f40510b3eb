package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/ingest/store"
)

// Column lists are explicit: ClickHouse 18.16 sends an empty header for an
// INSERT without one.
var (
	rollupColumns = []string{"minute", "writer", "version", "service", "tenant", "route", "tier", "kind",
		"count", "errors", "duration_seconds", "ru", "bytes", "rows", "active_session_seconds", "latency_idx", "latency_cnt"}
	hotKeyColumns    = []string{"minute", "writer", "version", "key", "tenant", "count", "err"}
	statementColumns = []string{"time", "time_ns", "writer", "pid", "tenant", "route", "application", "query",
		"state", "wait_event_type", "wait_event", "duration_seconds"}
	auditColumns = []string{"time", "time_ns", "who", "action", "policy_version", "rule"}
)

// send appends columns to one batch and sends it. With a cluster, the
// write waits until every shard has its rows (insert_distributed_sync), so
// a nil error means stored, not queued.
func (s *Store) send(ctx context.Context, table string, columns []string, cols []any) (err error) {
	if err := s.check(); err != nil {
		return err
	}
	start := time.Now()
	defer func() {
		if err != nil {
			s.writeErrors.WithLabelValues(table).Inc()
		}
		s.writeTime.Observe(time.Since(start).Seconds())
	}()
	if s.schema.Cluster != "" {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_distributed_sync": 1}))
	}
	q := fmt.Sprintf("INSERT INTO %s (%s)", s.schema.target(table), strings.Join(columns, ", "))
	batch, err := s.conn.PrepareBatch(ctx, q)
	if err != nil {
		return fmt.Errorf("chstore: write %s: %w", table, err)
	}
	defer batch.Abort()
	for i, c := range cols {
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("chstore: write %s column %s: %w", table, columns[i], err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("chstore: write %s: %w", table, err)
	}
	return nil
}

// WriteRollups implements store.Store. Rows are appended column by column.
func (s *Store) WriteRollups(ctx context.Context, rows []store.Rollup) error {
	if err := store.ValidateRollups(rows); err != nil || len(rows) == 0 {
		return err
	}
	n := len(rows)
	var (
		minute          = make([]time.Time, n)
		writer, service = make([]string, n), make([]string, n)
		tenant, route   = make([]string, n), make([]string, n)
		kind            = make([]string, n)
		version         = make([]uint64, n)
		tier            = make([]uint8, n)
		count, errs     = make([]uint64, n), make([]uint64, n)
		bytes, nrows    = make([]uint64, n), make([]uint64, n)
		dur, ru, ass    = make([]float64, n), make([]float64, n), make([]float64, n)
		latIdx          = make([][]uint16, n)
		latCnt          = make([][]uint64, n)
		idxBuf          []uint16
		cntBuf          []uint64
	)
	for i := range rows {
		r := &rows[i]
		minute[i], writer[i], version[i], service[i] = r.Minute.UTC(), r.Writer, r.Version, r.Service
		tenant[i], route[i], tier[i], kind[i] = r.Tenant, r.Route, uint8(r.Tier), r.Kind
		count[i], errs[i], dur[i], ru[i] = r.Count, r.Errors, r.DurationSeconds, r.RU
		bytes[i], nrows[i], ass[i] = r.Bytes, r.Rows, r.ActiveSessionSeconds
		start := len(idxBuf)
		for j, c := range r.Latency {
			if c != 0 {
				idxBuf = append(idxBuf, uint16(j))
				cntBuf = append(cntBuf, c)
			}
		}
		latIdx[i], latCnt[i] = idxBuf[start:len(idxBuf):len(idxBuf)], cntBuf[start:len(cntBuf):len(cntBuf)]
	}
	err := s.send(ctx, TableRollups, rollupColumns, []any{minute, writer, version, service, tenant, route, tier, kind,
		count, errs, dur, ru, bytes, nrows, ass, latIdx, latCnt})
	if err == nil {
		s.rowsWritten.WithLabelValues(TableRollups).Add(float64(n))
	}
	return err
}

// WriteHotKeys implements store.Store.
func (s *Store) WriteHotKeys(ctx context.Context, rows []store.HotKey) error {
	if err := store.ValidateHotKeys(rows); err != nil || len(rows) == 0 {
		return err
	}
	n := len(rows)
	minute := make([]time.Time, n)
	writer, key, tenant := make([]string, n), make([]string, n), make([]string, n)
	version, count, errb := make([]uint64, n), make([]uint64, n), make([]uint64, n)
	for i, r := range rows {
		minute[i], writer[i], version[i], key[i], tenant[i], count[i], errb[i] = r.Minute.UTC(), r.Writer, r.Version, r.Key, r.Tenant, r.Count, r.Err
	}
	err := s.send(ctx, TableHotKeys, hotKeyColumns, []any{minute, writer, version, key, tenant, count, errb})
	if err == nil {
		s.rowsWritten.WithLabelValues(TableHotKeys).Add(float64(n))
	}
	return err
}

// WriteStatements implements store.Store. The time keeps its nanoseconds
// in time_ns (DateTime64 is not on 18.16).
func (s *Store) WriteStatements(ctx context.Context, rows []store.Statement) error {
	if err := store.ValidateStatements(rows); err != nil || len(rows) == 0 {
		return err
	}
	n := len(rows)
	tm, ns, pid := make([]time.Time, n), make([]uint32, n), make([]int32, n)
	writer, tenant, route, app, query := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	state, wet, we := make([]string, n), make([]string, n), make([]string, n)
	dur := make([]float64, n)
	for i, r := range rows {
		tm[i], ns[i] = r.Time.UTC().Truncate(time.Second), uint32(r.Time.Nanosecond())
		writer[i], pid[i], tenant[i], route[i], app[i], query[i] = r.Writer, r.PID, r.Tenant, r.Route, r.Application, r.Query
		state[i], wet[i], we[i], dur[i] = r.State, r.WaitEventType, r.WaitEvent, r.Duration.Seconds()
	}
	err := s.send(ctx, TableStatements, statementColumns, []any{tm, ns, writer, pid, tenant, route, app, query, state, wet, we, dur})
	if err == nil {
		s.rowsWritten.WithLabelValues(TableStatements).Add(float64(n))
	}
	return err
}

// WriteAudit implements store.Store.
func (s *Store) WriteAudit(ctx context.Context, rows []store.Audit) error {
	if err := store.ValidateAudit(rows); err != nil || len(rows) == 0 {
		return err
	}
	n := len(rows)
	tm, ns := make([]time.Time, n), make([]uint32, n)
	who, action, rule := make([]string, n), make([]string, n), make([]string, n)
	pv := make([]uint64, n)
	for i, r := range rows {
		tm[i], ns[i] = r.Time.UTC().Truncate(time.Second), uint32(r.Time.Nanosecond())
		who[i], action[i], pv[i], rule[i] = r.Who, r.Action, r.PolicyVersion, r.Rule
	}
	err := s.send(ctx, TableAudit, auditColumns, []any{tm, ns, who, action, pv, rule})
	if err == nil {
		s.rowsWritten.WithLabelValues(TableAudit).Add(float64(n))
	}
	return err
}
