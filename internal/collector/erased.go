package collector

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// erasedFile is where collector erase leaves, in DataDir, the time each
// tenant was erased at. A process buffers its reports while the collector
// is stopped for the erasure and sends them when it is back; without the
// file, the tenant's last minutes before the erasure would be merged and
// stored again. For ErasedKeep after an erasure, the tenant's rows in a
// report whose window began before it are dropped (the rest of the report
// is merged); rows of later windows are kept: the tenant may report again.
const erasedFile = "erased.json"

// ErasedKeep is how long after an erasure reports of earlier windows
// lose the tenant's rows: longer than any process keeps a report it could
// not send.
const ErasedKeep = 7 * 24 * time.Hour

// maxErasedFile bounds the file read at start (a few thousand erasures).
const maxErasedFile = 4 << 20

// erasedOnDisk is the file: each erased tenant and when.
type erasedOnDisk struct {
	Version int                  `json:"version"`
	Tenants map[string]time.Time `json:"tenants"`
}

// erasedBook is the erasures of the last ErasedKeep, read once at start:
// erase runs only on a stopped collector, so it does not change while the
// collector runs.
type erasedBook struct {
	at      map[string]time.Time
	latest  time.Time // the last erasure: a report of a later window needs no look
	dropped prometheus.Counter
}

// loadErased reads dataDir's erasures still in force at now; a missing
// file is none. A file that cannot be read is an error: starting without
// it would bring erased rows back.
func loadErased(dataDir string, now time.Time) (map[string]time.Time, error) {
	path := filepath.Join(dataDir, erasedFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("collector: erasures: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxErasedFile+1))
	if err == nil && len(b) > maxErasedFile {
		err = fmt.Errorf("larger than %d bytes", maxErasedFile)
	}
	var d erasedOnDisk
	if err == nil {
		err = json.Unmarshal(b, &d)
	}
	if err != nil {
		return nil, fmt.Errorf("collector: erasures %s: %w (it lists the tenants erased in the last %s: fix or remove it)", path, err, ErasedKeep)
	}
	at := make(map[string]time.Time, len(d.Tenants))
	for name, t := range d.Tenants {
		if now.Sub(t) < ErasedKeep {
			at[name] = t
		}
	}
	return at, nil
}

// recordErasure adds name, erased at t, to dataDir's erasures, dropping
// those older than ErasedKeep; the file is replaced atomically.
func recordErasure(dataDir, name string, t time.Time) error {
	at, err := loadErased(dataDir, t)
	if err != nil {
		return err
	}
	if at == nil {
		at = map[string]time.Time{}
	}
	at[name] = t.UTC()
	b, err := json.Marshal(erasedOnDisk{Version: 1, Tenants: at})
	if err != nil {
		return fmt.Errorf("collector: erasures: %w", err) // cannot happen: strings and times
	}
	if err := store.WriteFileAtomic(filepath.Join(dataDir, erasedFile), b); err != nil {
		return fmt.Errorf("collector: erasures: %w", err)
	}
	return nil
}

// newErasedBook reads cfg.DataDir's erasures and registers the counter of
// rows they drop.
func newErasedBook(cfg Config) (*erasedBook, error) {
	at, err := loadErased(cfg.DataDir, cfg.Now())
	if err != nil {
		return nil, err
	}
	e := &erasedBook{at: at, dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_collector_erased_rows_dropped_total",
		Help: "Rows, hot keys and other items of an erased tenant dropped from reports whose window began before its erasure (collector erase; a process had buffered them)."})}
	if err := cfg.Registerer.Register(e.dropped); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	if len(at) > 0 {
		names := make([]string, 0, len(at))
		for name, t := range at {
			names = append(names, name)
			e.latest = maxTime(e.latest, t)
		}
		slices.Sort(names)
		cfg.Logger.Info("erased tenants: their rows in reports of earlier windows are dropped", "tenants", names, "for", ErasedKeep)
	}
	return e, nil
}

// drop removes from rep the rows of every tenant erased after rep's
// window began, and says whether anything went (the report's encoded
// body no longer matches it). A report of a window after the last
// erasure — every report made after the collector came back — costs a
// comparison of times.
func (e *erasedBook) drop(rep *report.Report) bool {
	if e == nil || rep.Start.IsZero() || !rep.Start.Before(e.latest) {
		return false
	}
	var res WALErased
	changed := false
	for name, t := range e.at {
		if rep.Start.Before(t) && eraseFromReport(rep, name, &res) {
			changed = true
		}
	}
	if changed {
		e.dropped.Add(float64(res.Rows + res.Keys + res.Other))
	}
	return changed
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
