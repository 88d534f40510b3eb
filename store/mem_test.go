package store

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// memStore is a test double of the Store interface (not of a database):
// idempotent like the real stores, and made to fail on demand.
type memStore struct {
	down    atomic.Bool
	reject  atomic.Bool
	mu      sync.Mutex
	rollups map[rollupKey]Rollup
	hot     map[hotKeyKey]HotKey
	stmts   []Statement
	audit   []Audit
	writes  int
	order   []string // tenant of the first row of each rollup batch, in write order
	closed  bool
}

type rollupKey struct {
	minute                               time.Time
	writer, service, tenant, route, kind string
}

type hotKeyKey struct {
	minute      time.Time
	writer, key string
}

var errDown = errors.New("memstore: down")

func newMemStore() *memStore {
	return &memStore{rollups: map[rollupKey]Rollup{}, hot: map[hotKeyKey]HotKey{}}
}

func (m *memStore) check() error {
	if m.down.Load() {
		return errDown
	}
	if m.reject.Load() {
		return ErrInvalid
	}
	return nil
}

func (m *memStore) WriteRollups(_ context.Context, rows []Rollup) error {
	if err := m.check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if len(rows) > 0 {
		m.order = append(m.order, rows[0].Tenant)
	}
	for _, r := range rows {
		k := rollupKey{r.Minute.UTC(), r.Writer, r.Service, r.Tenant, r.Route, r.Kind}
		if old, ok := m.rollups[k]; !ok || old.Version <= r.Version {
			m.rollups[k] = r
		}
	}
	return nil
}

func (m *memStore) WriteHotKeys(_ context.Context, rows []HotKey) error {
	if err := m.check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rows {
		k := hotKeyKey{r.Minute.UTC(), r.Writer, r.Key}
		if old, ok := m.hot[k]; !ok || old.Version <= r.Version {
			m.hot[k] = r
		}
	}
	return nil
}

func (m *memStore) WriteStatements(_ context.Context, rows []Statement) error {
	if err := m.check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stmts = append(m.stmts, rows...)
	return nil
}

func (m *memStore) WriteAudit(_ context.Context, rows []Audit) error {
	if err := m.check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.audit = append(m.audit, rows...)
	return nil
}

func (m *memStore) Usage(context.Context, time.Time, time.Time, bool) ([]Usage, error) {
	return nil, errors.New("memstore: not needed by these tests")
}

func (m *memStore) History(context.Context, string, time.Time, time.Time) ([]Rollup, error) {
	return nil, errors.New("memstore: not needed by these tests")
}

func (m *memStore) Ping(context.Context) error { return m.check() }

func (m *memStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// counts returns the stored Count of every rollup by tenant.
func (m *memStore) counts() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]uint64{}
	for _, r := range m.rollups {
		out[r.Tenant] += r.Count
	}
	return out
}

func (m *memStore) tenants() []string {
	var ts []string
	for t := range m.counts() {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}
