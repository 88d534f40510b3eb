package store

import (
	"context"
	"fmt"
	"time"
)

// MinRetention is the shortest retention a store accepts: shorter would
// remove minutes the collector may still write (late reports, the spool).
const MinRetention = time.Hour

// RetainResult is what one Retain removed.
type RetainResult struct {
	// Rows deleted (DuckDB), or held by the partitions dropped
	// (ClickHouse), summed over the tables.
	Rows uint64
	// Partitions dropped (ClickHouse; one per table, day and node).
	Partitions int
}

// Retainer is a Store that can remove the history older than a point in
// time: the rollups, hot keys and statements whose minute (or time) is
// before it. Policy audit rows are kept. The DuckDB and ClickHouse stores
// and the Spool (when its next store can) implement it.
//
// Retain runs beside writes and reads without holding a store-wide lock;
// a store may remove less than asked (ClickHouse drops whole daily
// partitions only, so rows of the day that straddles before stay until
// the whole day is older; a TTL removes them on servers that have one).
type Retainer interface {
	Retain(ctx context.Context, before time.Time) (RetainResult, error)
}

// Erased counts what an erasure removed from one place, by table.
type Erased struct {
	Rollups    uint64 `json:"rollups"`
	HotKeys    uint64 `json:"hot_keys"`
	Statements uint64 `json:"statements"`
}

// Total is the rows removed from every table.
func (e Erased) Total() uint64 { return e.Rollups + e.HotKeys + e.Statements }

// Add adds o's counts to e.
func (e *Erased) Add(o Erased) {
	e.Rollups += o.Rollups
	e.HotKeys += o.HotKeys
	e.Statements += o.Statements
}

// TenantEraser is a Store that can erase one tenant's rows (a customer
// leaving, a privacy request): its rollups, the hot keys attributed to it
// and its sampled statements. Policy audit rows are kept. It returns once
// reads no longer show the rows, with how many there were.
type TenantEraser interface {
	EraseTenant(ctx context.Context, tenant string) (Erased, error)
}

// Retain implements Retainer by asking next; spooled rows are written
// when the store answers again (and removed by a later Retain).
func (s *Spool) Retain(ctx context.Context, before time.Time) (RetainResult, error) {
	r, ok := s.next.(Retainer)
	if !ok {
		return RetainResult{}, fmt.Errorf("store: spool: %T cannot remove old rows", s.next)
	}
	return r.Retain(ctx, before)
}

var _ Retainer = (*Spool)(nil)
