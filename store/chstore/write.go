package chstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/qtop-dev/qtop/store"
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

// send appends columns (of rows rows) to one batch and sends it, with the settings of
// Schema.InsertSettings: a nil error means stored, not queued.
func (s *Store) send(ctx context.Context, table string, rows int, columns []string, cols []any) (err error) {
	if err := s.check(); err != nil {
		return err
	}
	start := time.Now()
	defer func() {
		s.wm.Written(table, rows, start, err)
		if err != nil {
			err = classify(err) // unavailable.go
		}
	}()
	if set := s.schema.InsertSettings(s.cfg.asyncInsert); len(set) > 0 {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(set))
	}
	q := fmt.Sprintf("INSERT INTO %s (%s)", s.schema.target(table), strings.Join(columns, ", "))
	batch, err := s.conn.PrepareBatch(ctx, q)
	if err != nil {
		return fmt.Errorf("chstore: write %s: %w", table, err)
	}
	defer batch.Abort()
	block := batch.Columns()
	for i, c := range cols {
		if err := appendColumn(batch.Column(i), block[i], c); err != nil {
			return fmt.Errorf("chstore: write %s column %s: %w", table, columns[i], err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("chstore: write %s: %w", table, err)
	}
	return nil
}

// rollupCols holds one batch's columns; reused through a pool, as a
// 100k-row batch would otherwise allocate ~25 MB of slices each time.
type rollupCols struct {
	minute                               []time.Time
	writer, service, tenant, route, kind []string
	version, count, errs, bytes, nrows   []uint64
	tier                                 []uint8
	dur, ru, ass                         []float64
	idxBuf                               []uint16 // every row's non-empty latency buckets
	cntBuf                               []uint64 // and their counts
	ends                                 []int    // end of each row's buckets in idxBuf and cntBuf
}

var colPool = sync.Pool{New: func() any { return new(rollupCols) }}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (c *rollupCols) fill(rows []store.Rollup) {
	n := len(rows)
	c.minute = resize(c.minute, n)
	c.writer, c.service, c.tenant = resize(c.writer, n), resize(c.service, n), resize(c.tenant, n)
	c.route, c.kind = resize(c.route, n), resize(c.kind, n)
	c.version, c.count, c.errs = resize(c.version, n), resize(c.count, n), resize(c.errs, n)
	c.bytes, c.nrows, c.tier = resize(c.bytes, n), resize(c.nrows, n), resize(c.tier, n)
	c.dur, c.ru, c.ass = resize(c.dur, n), resize(c.ru, n), resize(c.ass, n)
	c.idxBuf, c.cntBuf, c.ends = c.idxBuf[:0], c.cntBuf[:0], c.ends[:0]
	for i := range rows {
		r := &rows[i]
		c.minute[i], c.writer[i], c.version[i], c.service[i] = r.Minute.UTC(), r.Writer, r.Version, r.Service
		c.tenant[i], c.route[i], c.tier[i], c.kind[i] = r.Tenant, r.Route, uint8(r.Tier), r.Kind
		c.count[i], c.errs[i], c.dur[i], c.ru[i] = r.Count, r.Errors, r.DurationSeconds, r.RU
		c.bytes[i], c.nrows[i], c.ass[i] = r.Bytes, r.Rows, r.ActiveSessionSeconds
		c.idxBuf, c.cntBuf = r.Latency.AppendPairs(c.idxBuf, c.cntBuf)
		c.ends = append(c.ends, len(c.idxBuf))
	}
}

// release drops references to the caller's strings before pooling.
func (c *rollupCols) release() {
	clear(c.writer)
	clear(c.service)
	clear(c.tenant)
	clear(c.route)
	clear(c.kind)
	colPool.Put(c)
}

// flatArray is an Array column as one slice of every row's elements and
// the end of each row in it.
type flatArray[T uint16 | uint64] struct {
	ends []int
	vals []T
}

// appendColumn appends a whole column.
func appendColumn(col driver.BatchColumn, block column.Interface, c any) error {
	switch c := c.(type) {
	case flatArray[uint16]:
		return appendArray(col, block, c)
	case flatArray[uint64]:
		return appendArray(col, block, c)
	}
	return col.Append(c)
}

// appendArray appends an Array column in one go: it decodes the column's
// wire form (each row's end as a UInt64, then the elements) into the
// batch's still empty column. clickhouse-go appends an array row by row and
// boxes each element into an interface, an allocation for every value
// above 255; a histogram batch has several per row. Where the column is
// not an empty Array it falls back to that, row by row.
func appendArray[T uint16 | uint64](col driver.BatchColumn, block column.Interface, c flatArray[T]) error {
	arr, ok := block.(*column.Array)
	if !ok || arr.Rows() != 0 {
		start := 0
		for _, end := range c.ends {
			if err := col.AppendRow(c.vals[start:end:end]); err != nil {
				return err
			}
			start = end
		}
		return nil
	}
	wire := make([]byte, 0, 8*(len(c.ends)+len(c.vals)))
	for _, end := range c.ends {
		wire = binary.LittleEndian.AppendUint64(wire, uint64(end))
	}
	switch vals := any(c.vals).(type) {
	case []uint16:
		for _, v := range vals {
			wire = binary.LittleEndian.AppendUint16(wire, v)
		}
	case []uint64:
		for _, v := range vals {
			wire = binary.LittleEndian.AppendUint64(wire, v)
		}
	}
	return arr.Decode(proto.NewReader(bytes.NewReader(wire)), len(c.ends))
}

// WriteRollups implements store.Store. Rows are appended column by column;
// then each hour written is marked, so its sums are recomputed, and at most
// once a minute the closed hours due are summed (sums.go).
func (s *Store) WriteRollups(ctx context.Context, rows []store.Rollup) error {
	if err := store.ValidateRollups(rows); err != nil || len(rows) == 0 {
		return err
	}
	if err := insertRollups(ctx, s, rows); err != nil {
		return err
	}
	// The hours written are marked after the rows are stored, so sums
	// computed before the rows were visible never count.
	if err := markWritten(ctx, s, rows); err != nil {
		return err
	}
	maybeSum(ctx, s)
	return nil
}

func insertRollups(ctx context.Context, s *Store, rows []store.Rollup) error {
	c := colPool.Get().(*rollupCols)
	defer c.release()
	c.fill(rows)
	return s.send(ctx, TableRollups, len(rows), rollupColumns, []any{c.minute, c.writer, c.version, c.service, c.tenant, c.route, c.tier, c.kind,
		c.count, c.errs, c.dur, c.ru, c.bytes, c.nrows, c.ass, flatArray[uint16]{c.ends, c.idxBuf}, flatArray[uint64]{c.ends, c.cntBuf}})
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
	return s.send(ctx, TableHotKeys, n, hotKeyColumns, []any{minute, writer, version, key, tenant, count, errb})
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
	return s.send(ctx, TableStatements, n, statementColumns, []any{tm, ns, writer, pid, tenant, route, app, query, state, wet, we, dur})
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
	return s.send(ctx, TableAudit, n, auditColumns, []any{tm, ns, who, action, pv, rule})
}
