package collector

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// baselinesFile is where the baseline book is kept in DataDir.
const baselinesFile = "baselines.json"

// maxBaselinesFile bounds the file read back at start (the book holds at
// most maxBaselineTenants × baselineSlots minutes, about 12 MB of JSON,
// and as many of routes).
const maxBaselinesFile = 64 << 20

// baselinesOnDisk is the saved book: each tenant's and each service's
// minutes of the trailing hour, as sums over the seconds seen (a
// service's share, RU/s and DB load are 0), and the seconds learnt in
// each minute ([unix minute, seconds]). A file from before DB load and
// the seconds learnt were kept loads as well: its DB load is 0, and each
// minute's seconds learnt are its tenant's most.
type baselinesOnDisk struct {
	Version  int                     `json:"version"`
	Tenants  map[string][]minuteSums `json:"tenants"`
	Services map[string][]minuteSums `json:"services,omitempty"`
	Learnt   [][2]float64            `json:"learnt,omitempty"`
	// Routes are the tenants' routes' minutes, by "tenant route" (a NUL
	// between them; a route's share, RU/s and DB load are 0). Files from
	// before route baselines have none.
	Routes map[string][]minuteSums `json:"routes,omitempty"`
	// Flagged is since when (unix seconds) each offender the book's
	// detector named at the save was flagged. Older files have none.
	Flagged map[string]int64 `json:"flagged,omitempty"`
}

// minuteSums is one minute of a tenant: [unix minute, seconds seen, p95
// seconds, share of RU, RU/s, DB load] (the last four summed over the
// seconds; an older file's five leave the DB load 0).
type minuteSums [6]float64

// encode returns the book's minutes as saved (nil when it is not saved).
// b.mu is held.
func (b *baselineBook) encode() []byte {
	if b.file == "" {
		return nil
	}
	d := baselinesOnDisk{Version: 1, Tenants: b.encodeRings(b.tenants), Services: b.encodeRings(b.services), Routes: b.encodeRings(b.routes),
		Flagged: b.encodeFlags()}
	for i := range baselineSlots {
		if b.learnt.n[i] > 0 && b.learnt.at[i] >= b.minute-baselineSlots {
			d.Learnt = append(d.Learnt, [2]float64{float64(b.learnt.at[i]), float64(b.learnt.n[i])})
		}
	}
	out, err := json.Marshal(d)
	if err != nil {
		return nil // cannot happen: finite numbers and strings
	}
	return out
}

// encodeRings returns the minutes of the trailing hour of each ring.
func (b *baselineBook) encodeRings(rings map[string]*tenantMinutes) map[string][]minuteSums {
	out := make(map[string][]minuteSums, len(rings))
	for name, tm := range rings {
		var ms []minuteSums
		for i := range baselineSlots {
			if tm.n[i] > 0 && tm.at[i] >= b.minute-baselineSlots {
				ms = append(ms, minuteSums{float64(tm.at[i]), float64(tm.n[i]), tm.p95[i], tm.share[i], tm.ru[i], tm.db[i]})
			}
		}
		if ms != nil {
			out[name] = ms
		}
	}
	return out
}

// write saves the encoded book; a failure is logged by the caller's
// logger once per minute at most (it is called at each minute's turn).
func (b *baselineBook) write(data []byte) {
	save := b.save
	if save == nil {
		save = saveBaselines
	}
	if err := save(b.file, data); err != nil && b.log != nil {
		b.log.Warn("baselines not saved: a restart will learn them again", "file", b.file, "err", err)
	}
}

func saveBaselines(path string, data []byte) error { return store.WriteFileAtomic(path, data) }

// load reads the book saved at path, if any: a missing file is an empty
// book, a bad one is reported (and the book starts empty).
func (b *baselineBook) load(path string) error {
	b.file = path
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Size() > maxBaselinesFile {
		return fmt.Errorf("%s: %d bytes, larger than %d: not read", path, st.Size(), maxBaselinesFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var d baselinesOnDisk
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if d.Version != 1 {
		return fmt.Errorf("%s: version %d: want 1", path, d.Version)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, ms := range d.Tenants {
		if tenant.ValidateTenant(name) == nil && len(b.tenants) < maxBaselineTenants {
			b.tenants[name] = decodeRing(ms)
		}
	}
	for name, ms := range d.Services {
		if tenant.ValidateString("service", name, report.MaxStringLen) == nil && len(b.services) < maxBaselineServices {
			b.services[name] = decodeRing(ms)
		}
	}
	for key, ms := range d.Routes {
		t, rt, ok := strings.Cut(key, "\x00")
		if ok && tenant.ValidateTenant(t) == nil && tenant.ValidateString("route", rt, report.MaxStringLen) == nil && len(b.routes) < maxBaselineRoutes {
			b.routes[key] = decodeRing(ms)
		}
	}
	b.loadLearnt(d.Learnt)
	b.loadFlags(d.Flagged)
	return nil
}

// loadLearnt sets the seconds learnt in each minute, as saved; a file
// that has none (from before they were kept) gives each minute its
// tenants' most. b.mu is held.
func (b *baselineBook) loadLearnt(learnt [][2]float64) {
	set := func(m int64, n int) {
		if slot := m % baselineSlots; m > 0 && n > 0 && (b.learnt.at[slot] != m || b.learnt.n[slot] < n) {
			b.learnt.at[slot], b.learnt.n[slot] = m, n
		}
	}
	for _, x := range learnt {
		set(int64(x[0]), int(x[1]))
	}
	if len(learnt) > 0 {
		return
	}
	for _, tm := range b.tenants {
		for i := range baselineSlots {
			set(tm.at[i], tm.n[i])
		}
	}
}

// decodeRing is a ring of minutes as saved.
func decodeRing(ms []minuteSums) *tenantMinutes {
	tm := &tenantMinutes{}
	for _, x := range ms {
		m, n := int64(x[0]), int(x[1])
		if n <= 0 || m <= 0 {
			continue
		}
		slot := m % baselineSlots
		tm.at[slot], tm.n[slot], tm.p95[slot], tm.share[slot], tm.ru[slot], tm.db[slot] = m, n, x[2], x[3], x[4], x[5]
		tm.lastMinute = max(tm.lastMinute, m)
	}
	return tm
}

// eraseBaselines removes one tenant from the book saved in dataDir (the
// collector erase command: a baseline is data about the tenant too). It
// reports whether the tenant was there.
func eraseBaselines(dataDir, name string) (bool, error) {
	path := filepath.Join(dataDir, baselinesFile)
	b := newBaselineBook()
	if err := b.load(path); err != nil {
		return false, fmt.Errorf("collector: erase: baselines: %w", err)
	}
	_, ok := b.tenants[name]
	if routes := b.eraseRoutes(name); !ok && !routes {
		return false, nil
	}
	delete(b.tenants, name)
	for _, tm := range b.tenants {
		b.minute = max(b.minute, tm.lastMinute)
	}
	if err := saveBaselines(path, b.encode()); err != nil {
		return false, fmt.Errorf("collector: erase: baselines: %w", err)
	}
	return true, nil
}
