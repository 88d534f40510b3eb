package sqlcomment

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"reflect"
	"time"
)

// rows counts rows and reports the query to the Observer when closed, so
// that the duration includes row iteration. It exists only with
// WithObserver. Its ColumnType methods and result-set methods forward to
// the wrapped rows, and otherwise answer what database/sql assumes for rows
// without them.
type rows struct {
	r      driver.Rows
	ctx    context.Context
	cm     *Commenter
	ev     Event
	n      int64
	err    error
	closed bool
	run    *budgetRun // with WithBudgets: finished when the rows close
}

var (
	_ driver.Rows                           = (*rows)(nil)
	_ driver.RowsNextResultSet              = (*rows)(nil)
	_ driver.RowsColumnTypeScanType         = (*rows)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)
	_ driver.RowsColumnTypeLength           = (*rows)(nil)
	_ driver.RowsColumnTypeNullable         = (*rows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*rows)(nil)
)

func (r *rows) Columns() []string { return r.r.Columns() }

func (r *rows) Next(dest []driver.Value) error {
	err := r.r.Next(dest)
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.run.err(err)
	}
	switch {
	case err == nil:
		r.n++
	case !errors.Is(err, io.EOF) && r.err == nil:
		r.err = err
	}
	return err
}

func (r *rows) Close() error {
	err := r.run.err(r.r.Close())
	if !r.closed {
		r.closed = true
		if r.run != nil {
			r.run.finish(r.err)
		}
		if !r.cm.Observing() {
			return err
		}
		r.ev.Duration = time.Since(r.ev.Start)
		r.ev.Rows = r.n
		r.ev.Err = r.err
		if r.ev.Err == nil {
			r.ev.Err = err
		}
		if r.ev.Err != nil && r.n == 0 {
			r.ev.Rows = -1 // failed before any row
		}
		r.cm.Observe(r.ctx, r.ev)
	}
	return err
}

func (r *rows) HasNextResultSet() bool {
	if m, ok := r.r.(driver.RowsNextResultSet); ok {
		return m.HasNextResultSet()
	}
	return false
}

func (r *rows) NextResultSet() error {
	if m, ok := r.r.(driver.RowsNextResultSet); ok {
		err := m.NextResultSet()
		if err != nil && !errors.Is(err, io.EOF) {
			err = r.run.err(err)
			if r.err == nil {
				r.err = err
			}
		}
		return err
	}
	return io.EOF
}

var anyType = reflect.TypeFor[any]()

func (r *rows) ColumnTypeScanType(i int) reflect.Type {
	if m, ok := r.r.(driver.RowsColumnTypeScanType); ok {
		return m.ColumnTypeScanType(i)
	}
	return anyType
}

func (r *rows) ColumnTypeDatabaseTypeName(i int) string {
	if m, ok := r.r.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return m.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *rows) ColumnTypeLength(i int) (int64, bool) {
	if m, ok := r.r.(driver.RowsColumnTypeLength); ok {
		return m.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *rows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if m, ok := r.r.(driver.RowsColumnTypeNullable); ok {
		return m.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *rows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if m, ok := r.r.(driver.RowsColumnTypePrecisionScale); ok {
		return m.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
