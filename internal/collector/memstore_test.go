package collector

import (
	"context"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/store"
)

// memStore keeps rows in memory with the Store contract's replacement
// rule (the latest version of a key wins), so unit tests can check what
// the collector writes without a database. The real stores are tested
// against DuckDB and ClickHouse in store_test.go.
type memStore struct {
	mu      sync.Mutex
	rollups map[rkey]store.Rollup
	hot     map[hkey]store.HotKey
	stmts   []store.Statement
	audit   []store.Audit
	fail    error
	writes  int
	// usageCalls counts Usage queries.
	usageCalls int
}

type rkey struct {
	minute                               int64
	writer, service, tenant, route, kind string
}

type hkey struct {
	minute      int64
	writer, key string
}

func newMemStore() *memStore {
	return &memStore{rollups: map[rkey]store.Rollup{}, hot: map[hkey]store.HotKey{}}
}

func (m *memStore) WriteRollups(ctx context.Context, rows []store.Rollup) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.writes++
	for _, r := range rows {
		k := rkey{r.Minute.Unix(), r.Writer, r.Service, r.Tenant, r.Route, r.Kind}
		if old, ok := m.rollups[k]; !ok || r.Version > old.Version {
			m.rollups[k] = r
		}
	}
	return nil
}

func (m *memStore) WriteHotKeys(ctx context.Context, rows []store.HotKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for _, r := range rows {
		k := hkey{r.Minute.Unix(), r.Writer, r.Key}
		if old, ok := m.hot[k]; !ok || r.Version > old.Version {
			m.hot[k] = r
		}
	}
	return nil
}

func (m *memStore) WriteStatements(ctx context.Context, rows []store.Statement) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.stmts = append(m.stmts, rows...)
	return nil
}

func (m *memStore) WriteAudit(ctx context.Context, rows []store.Audit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.audit = append(m.audit, rows...)
	return nil
}

func (m *memStore) Usage(ctx context.Context, from, to time.Time, byRoute bool) ([]store.Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usageCalls++
	acc := map[[2]string]*store.Usage{}
	for _, r := range m.rollups {
		if r.Minute.Before(from) || !r.Minute.Before(to) {
			continue
		}
		k := [2]string{r.Tenant, ""}
		if byRoute {
			k[1] = r.Route
		}
		u := acc[k]
		if u == nil {
			u = &store.Usage{Tenant: k[0], Route: k[1]}
			acc[k] = u
		}
		switch r.Kind {
		case store.KindDB:
			u.DBSeconds += r.DurationSeconds
		case store.KindPG:
			u.DBSeconds += r.ActiveSessionSeconds - r.DurationSeconds
		default:
			u.Requests += r.Count
			u.Errors += r.Errors
			u.DurationSeconds += r.DurationSeconds
		}
		u.RU += r.RU
		u.Bytes += r.Bytes
	}
	var out []store.Usage
	for _, u := range acc {
		out = append(out, *u)
	}
	return out, nil
}

func (m *memStore) History(ctx context.Context, tenant string, from, to time.Time) ([]store.Rollup, error) {
	return nil, nil
}

func (m *memStore) Ping(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fail
}

func (m *memStore) Close() error { return nil }

// sum adds up a field over the stored rollups of tenant (all when "").
func (m *memStore) sum(tenant, kind string, f func(store.Rollup) float64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s float64
	for _, r := range m.rollups {
		if (tenant == "" || r.Tenant == tenant) && (kind == "" || r.Kind == kind) {
			s += f(r)
		}
	}
	return s
}

func (m *memStore) ReadAudit(ctx context.Context, from, to time.Time) ([]store.Audit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Audit
	for _, a := range m.audit {
		if !a.Time.Before(from) && a.Time.Before(to) {
			out = append(out, a)
		}
	}
	return out, nil
}
