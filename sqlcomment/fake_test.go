package sqlcomment

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// A fake database/sql driver for the wrapper's interface forwarding (never
// for what PostgreSQL does). Two families: min* implement only what
// database/sql requires; full* implement every optional interface. Each
// call is written to a shared log, so a test can check that the wrapped
// driver receives the same calls as the raw one.

type fakeLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *fakeLog) add(format string, args ...any) {
	l.mu.Lock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *fakeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

// stmtKind picks which optional interfaces a fullConn's statements have.
type stmtKind int

const (
	kindMin stmtKind = iota
	kindNVC
	kindCC
	kindBoth
)

type minDriver struct{ log *fakeLog }

func (d *minDriver) Open(name string) (driver.Conn, error) {
	d.log.add("driver.Open %s", name)
	return &minConn{log: d.log}, nil
}

type fullDriver struct {
	log  *fakeLog
	kind stmtKind
}

func (d *fullDriver) Open(name string) (driver.Conn, error) {
	d.log.add("driver.Open %s", name)
	return &fullConn{minConn{log: d.log}, d.kind}, nil
}

func (d *fullDriver) OpenConnector(name string) (driver.Connector, error) {
	d.log.add("driver.OpenConnector %s", name)
	return &fullConnector{d: d}, nil
}

type fullConnector struct{ d *fullDriver }

func (c *fullConnector) Connect(context.Context) (driver.Conn, error) {
	c.d.log.add("connector.Connect")
	return &fullConn{minConn{log: c.d.log}, c.d.kind}, nil
}
func (c *fullConnector) Driver() driver.Driver { return c.d }
func (c *fullConnector) Close() error {
	c.d.log.add("connector.Close")
	return nil
}

// money is an argument type only the full driver's checkers accept.
type money int64

type minConn struct{ log *fakeLog }

func (c *minConn) Prepare(q string) (driver.Stmt, error) {
	c.log.add("conn.Prepare %s", q)
	if strings.Contains(q, "BADPREPARE") {
		return nil, errors.New("fake: bad prepare")
	}
	return &minStmt{log: c.log, q: q}, nil
}
func (c *minConn) Close() error { c.log.add("conn.Close"); return nil }
func (c *minConn) Begin() (driver.Tx, error) {
	c.log.add("conn.Begin")
	return &fakeTx{log: c.log}, nil
}

type fullConn struct {
	minConn
	kind stmtKind
}

func (c *fullConn) PrepareContext(_ context.Context, q string) (driver.Stmt, error) {
	c.log.add("conn.PrepareContext %s", q)
	s := &minStmt{log: c.log, q: q}
	switch c.kind {
	case kindNVC:
		return &nvcStmt{s}, nil
	case kindCC:
		return &ccStmt{s}, nil
	case kindBoth:
		return &fullStmt{s}, nil
	}
	return s, nil
}

func (c *fullConn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.log.add("conn.ExecContext %s %v", q, args)
	if strings.Contains(q, "SKIP") {
		return nil, driver.ErrSkip
	}
	if strings.Contains(q, "FAIL") {
		return nil, errors.New("fake: exec failed")
	}
	return driver.RowsAffected(3), nil
}

func (c *fullConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.log.add("conn.QueryContext %s %v", q, args)
	if strings.Contains(q, "SKIP") {
		return nil, driver.ErrSkip
	}
	if strings.Contains(q, "FAIL") {
		return nil, errors.New("fake: query failed")
	}
	return &fullRows{minRows{log: c.log, sets: 2}}, nil
}

func (c *fullConn) Ping(context.Context) error { c.log.add("conn.Ping"); return nil }

func (c *fullConn) BeginTx(_ context.Context, o driver.TxOptions) (driver.Tx, error) {
	c.log.add("conn.BeginTx %d %v", o.Isolation, o.ReadOnly)
	return &fakeTx{log: c.log}, nil
}

func (c *fullConn) ResetSession(context.Context) error { c.log.add("conn.ResetSession"); return nil }
func (c *fullConn) IsValid() bool                      { c.log.add("conn.IsValid"); return true }

func (c *fullConn) CheckNamedValue(nv *driver.NamedValue) error {
	c.log.add("conn.CheckNamedValue %d", nv.Ordinal)
	if m, ok := nv.Value.(money); ok {
		nv.Value = int64(m) * 100
		return nil
	}
	return driver.ErrSkip
}

type minStmt struct {
	log *fakeLog
	q   string
}

func (s *minStmt) Close() error  { s.log.add("stmt.Close"); return nil }
func (s *minStmt) NumInput() int { return -1 }
func (s *minStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.log.add("stmt.Exec %v", args)
	return driver.RowsAffected(2), nil
}
func (s *minStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.log.add("stmt.Query %v", args)
	return &minRows{log: s.log, sets: 1}, nil
}

type nvcStmt struct{ *minStmt }

func (s *nvcStmt) CheckNamedValue(nv *driver.NamedValue) error {
	s.log.add("stmt.CheckNamedValue %d", nv.Ordinal)
	if m, ok := nv.Value.(money); ok {
		nv.Value = int64(m) * 10
		return nil
	}
	return driver.ErrSkip
}

type ccStmt struct{ *minStmt }

func (s *ccStmt) ColumnConverter(i int) driver.ValueConverter {
	s.log.add("stmt.ColumnConverter %d", i)
	return moneyConverter{}
}

type moneyConverter struct{}

func (moneyConverter) ConvertValue(v any) (driver.Value, error) {
	if m, ok := v.(money); ok {
		return int64(m) * 1000, nil
	}
	return driver.DefaultParameterConverter.ConvertValue(v)
}

type fullStmt struct{ *minStmt }

func (s *fullStmt) CheckNamedValue(nv *driver.NamedValue) error {
	return (&nvcStmt{s.minStmt}).CheckNamedValue(nv)
}
func (s *fullStmt) ColumnConverter(i int) driver.ValueConverter {
	return (&ccStmt{s.minStmt}).ColumnConverter(i)
}
func (s *fullStmt) ExecContext(_ context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.log.add("stmt.ExecContext %v", args)
	return driver.RowsAffected(4), nil
}
func (s *fullStmt) QueryContext(_ context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.log.add("stmt.QueryContext %v", args)
	return &fullRows{minRows{log: s.log, sets: 1}}, nil
}

// minRows yields two rows of (id int64, name string) per result set.
type minRows struct {
	log  *fakeLog
	i    int
	sets int
}

func (r *minRows) Columns() []string { return []string{"id", "name"} }
func (r *minRows) Close() error      { r.log.add("rows.Close"); return nil }
func (r *minRows) Next(dest []driver.Value) error {
	if r.i >= 2 {
		return io.EOF
	}
	r.i++
	dest[0], dest[1] = int64(r.i), fmt.Sprintf("n%d", r.i)
	return nil
}

type fullRows struct{ minRows }

func (r *fullRows) HasNextResultSet() bool { r.log.add("rows.HasNextResultSet"); return r.sets > 1 }
func (r *fullRows) NextResultSet() error {
	r.log.add("rows.NextResultSet")
	if r.sets <= 1 {
		return io.EOF
	}
	r.sets--
	r.i = 0
	return nil
}
func (r *fullRows) ColumnTypeScanType(i int) reflect.Type {
	if i == 0 {
		return reflect.TypeFor[int64]()
	}
	return reflect.TypeFor[string]()
}
func (r *fullRows) ColumnTypeDatabaseTypeName(i int) string { return [...]string{"INT8", "TEXT"}[i] }
func (r *fullRows) ColumnTypeLength(i int) (int64, bool)    { return 8 * int64(i), i == 1 }
func (r *fullRows) ColumnTypeNullable(i int) (bool, bool)   { return i == 1, true }
func (r *fullRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	return 10, 2, i == 0
}

type fakeTx struct{ log *fakeLog }

func (t *fakeTx) Commit() error   { t.log.add("tx.Commit"); return nil }
func (t *fakeTx) Rollback() error { t.log.add("tx.Rollback"); return nil }
