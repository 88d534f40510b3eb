package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/store"
)

// errStoreNotOpen: the store could not be opened yet.
var errStoreNotOpen = errors.New("collector: store not reachable yet")

// lazyStore opens a store on first use and again after a failed open (at
// most every retryOpen), so a collector starts, logs and acknowledges
// reports while ClickHouse is still down; the spool in front of it keeps
// the minutes until it answers.
type lazyStore struct {
	open func(context.Context) (store.Store, error)
	log  *slog.Logger

	mu      sync.Mutex
	st      store.Store
	now     func() time.Time // Config.Now
	lastTry time.Time
	lastErr error
	lastLog time.Time // when a failed open was last logged
	closed  bool
}

const retryOpen = 2 * time.Second

// lazyLogEvery is how often a failed open is logged while its reason stays
// the same.
const lazyLogEvery = time.Minute

var _ store.Store = (*lazyStore)(nil)

func (l *lazyStore) get(ctx context.Context) (store.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, store.ErrClosed
	}
	if l.st != nil {
		return l.st, nil
	}
	now := l.now()
	if d := now.Sub(l.lastTry); d >= 0 && d < retryOpen {
		return nil, fmt.Errorf("%w: %v", errStoreNotOpen, l.lastErr)
	}
	if l.lastLog.IsZero() {
		l.lastLog = l.lastTry // the first failure was logged where it was made
	}
	l.lastTry = now
	st, err := l.open(ctx)
	if err != nil {
		// Said again when the reason changes and once a minute while it
		// lasts: an open that keeps failing for another reason than the
		// first (a node back, ZooKeeper not) must not be silent.
		if l.lastErr == nil || err.Error() != l.lastErr.Error() || now.Sub(l.lastLog) >= lazyLogEvery {
			l.log.Warn("store still not reachable; rows wait in the spool", "err", err)
			l.lastLog = now
		}
		l.lastErr = err
		return nil, fmt.Errorf("%w: %v", errStoreNotOpen, err)
	}
	l.log.Info("store reachable: opened")
	l.st = st
	return st, nil
}

func (l *lazyStore) WriteRollups(ctx context.Context, rows []store.Rollup) error {
	st, err := l.get(ctx)
	if err != nil {
		return err
	}
	return st.WriteRollups(ctx, rows)
}

func (l *lazyStore) WriteHotKeys(ctx context.Context, rows []store.HotKey) error {
	st, err := l.get(ctx)
	if err != nil {
		return err
	}
	return st.WriteHotKeys(ctx, rows)
}

func (l *lazyStore) WriteStatements(ctx context.Context, rows []store.Statement) error {
	st, err := l.get(ctx)
	if err != nil {
		return err
	}
	return st.WriteStatements(ctx, rows)
}

func (l *lazyStore) WriteAudit(ctx context.Context, rows []store.Audit) error {
	st, err := l.get(ctx)
	if err != nil {
		return err
	}
	return st.WriteAudit(ctx, rows)
}

func (l *lazyStore) Usage(ctx context.Context, from, to time.Time, byRoute bool) ([]store.Usage, error) {
	st, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return st.Usage(ctx, from, to, byRoute)
}

func (l *lazyStore) History(ctx context.Context, tenant string, from, to time.Time) ([]store.Rollup, error) {
	st, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return st.History(ctx, tenant, from, to)
}

func (l *lazyStore) Ping(ctx context.Context) error {
	st, err := l.get(ctx)
	if err != nil {
		return err
	}
	return st.Ping(ctx)
}

func (l *lazyStore) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return store.ErrClosed
	}
	l.closed = true
	if l.st != nil {
		return l.st.Close()
	}
	return nil
}

// ReadAudit implements store.AuditReader when the store it opens does.
func (l *lazyStore) ReadAudit(ctx context.Context, from, to time.Time) ([]store.Audit, error) {
	st, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	ar, ok := st.(store.AuditReader)
	if !ok {
		return nil, ErrNoAudit
	}
	return ar.ReadAudit(ctx, from, to)
}

// Retain implements store.Retainer when the store it opens does.
func (l *lazyStore) Retain(ctx context.Context, before time.Time) (store.RetainResult, error) {
	st, err := l.get(ctx)
	if err != nil {
		return store.RetainResult{}, err
	}
	r, ok := st.(store.Retainer)
	if !ok {
		return store.RetainResult{}, fmt.Errorf("collector: the store (%T) cannot remove old rows", st)
	}
	return r.Retain(ctx, before)
}
