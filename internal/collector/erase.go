package collector

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/tenant"
)

// ActionErase is the audit action of a tenant's erasure.
const ActionErase = "erase"

// ErrNoErase: the store cannot erase a tenant's rows.
var ErrNoErase = errors.New("collector: the store cannot erase a tenant")

// EraseConfig says what EraseTenant erases and where.
type EraseConfig struct {
	// Tenant is the tenant whose rows go (required).
	Tenant string
	// Store is the store's URL (StoreNone: the data folder only, and no
	// audit record); Cluster its ClickHouse cluster, as the collector's.
	Store, Cluster string
	// DataDir is the collector's data folder: its write-ahead log and
	// spool. The collector must not be running on it.
	DataDir string
	// Who made the erasure, for the audit record.
	Who    string
	Now    func() time.Time // default time.Now
	Logger *slog.Logger
	// OpenStore overrides how Store is opened (tests).
	OpenStore func(ctx context.Context, url string) (store.Store, error)
}

// WALErased is what an erasure removed from the write-ahead log.
type WALErased struct {
	Files   int `json:"files"`   // minute files rewritten
	Reports int `json:"reports"` // reports that held some of the tenant's data
	// Rows are report rows (tenant × route × kind), Keys hot keys
	// attributed to the tenant, Other its pool waits and quota usage.
	Rows  int `json:"rows"`
	Keys  int `json:"keys"`
	Other int `json:"other"`
	// Undecodable counts records that could not be decoded (left as they
	// are: the collector cannot read them either).
	Undecodable int `json:"undecodable"`
}

// Erasure is what EraseTenant removed, place by place; it is the audit
// record's content.
type Erasure struct {
	Tenant string            `json:"tenant"`
	Store  *store.Erased     `json:"store,omitempty"` // nil: no store (StoreNone)
	Spool  store.SpoolErased `json:"spool"`
	WAL    WALErased         `json:"wal"`
	// Baselines: the tenant's minutes were in the baselines kept in the
	// data folder, and are gone.
	Baselines bool `json:"baselines"`
	// RefusedBefore: for ErasedKeep, the collector on this data folder
	// drops the tenant's rows from reports of windows begun before it
	// (reports a process buffered while the collector was stopped).
	RefusedBefore time.Time `json:"refused_before"`
}

// EraseTenant removes one tenant's rows from a stopped collector's data
// folder — the write-ahead log of its open minutes and the batches
// spooled for an unreachable store, each file rewritten atomically — and
// from the store, then writes an audit record (who, when, what was
// removed where) to the store's audit log, as policy changes are.
//
// It takes the data folder's lock, so it refuses (ErrDataDirLocked) while
// a collector runs on it: a running collector holds the tenant's open
// minutes in memory and would write them again. Erasing offline keeps it
// simple and exact; a fleet sharing a store erases each collector's
// folder in turn (the store part is idempotent). It leaves the erasure's
// time in the folder (erased.json): for ErasedKeep, the collector drops
// the tenant's rows from reports of windows begun before it, which a
// process buffered while the collector was stopped. Rows of later windows
// are stored again: stop the tenant's traffic first.
func EraseTenant(ctx context.Context, cfg EraseConfig) (Erasure, error) {
	er := Erasure{Tenant: cfg.Tenant}
	if cfg.Tenant == "" {
		return er, fmt.Errorf("%w: erase: no tenant named", ErrConfig)
	}
	if err := tenant.ValidateTenant(cfg.Tenant); err != nil {
		return er, fmt.Errorf("%w: erase: %w", ErrConfig, err)
	}
	// A tenant named "other" is stored under its stand-in; the row named
	// "other" holds other tenants' load and is never erased by name.
	cfg.Tenant = tenant.Escape(cfg.Tenant)
	er.Tenant = cfg.Tenant
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if st, err := os.Stat(cfg.DataDir); err != nil || !st.IsDir() {
		return er, fmt.Errorf("%w: erase: data dir %q: not a folder (pass the collector's --data-dir)", ErrConfig, cfg.DataDir)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return er, err
	}
	defer lock.Close()
	// The store first: one that cannot be the one meant (a misspelt
	// database or cluster, a login refused, a DuckDB file missing or held)
	// stops the erase before the data dir is touched. One that is only
	// down is erased from later, by running erase again.
	var st store.Store
	var openErr error
	if cfg.Store != StoreNone {
		st, openErr = openEraseStore(ctx, cfg)
		if openErr != nil && storeMisnamed(cfg.Store, openErr) {
			return er, openErr
		}
		if st != nil {
			defer st.Close()
		}
	}
	if er.WAL, err = eraseWAL(filepath.Join(cfg.DataDir, "wal"), cfg.Tenant); err != nil {
		return er, err
	}
	if er.Spool, err = store.EraseSpooled(filepath.Join(cfg.DataDir, "spool"), cfg.Tenant); err != nil {
		return er, err
	}
	if er.Baselines, err = eraseBaselines(cfg.DataDir, cfg.Tenant); err != nil {
		return er, err
	}
	// Reports a process buffered while the collector was stopped would
	// bring the tenant's last minutes back: for ErasedKeep, the collector
	// drops the tenant's rows from reports of windows begun before now.
	er.RefusedBefore = cfg.Now().UTC()
	if err := recordErasure(cfg.DataDir, cfg.Tenant, er.RefusedBefore); err != nil {
		return er, err
	}
	if cfg.Store == StoreNone {
		return er, nil
	}
	if openErr != nil {
		return er, openErr
	}
	return er, eraseStore(ctx, cfg, st, &er)
}

// openEraseStore opens the store erase works on (EraseConfig.OpenStore,
// else the existing store of its URL).
func openEraseStore(ctx context.Context, cfg EraseConfig) (store.Store, error) {
	if cfg.OpenStore != nil {
		return cfg.OpenStore(ctx, cfg.Store)
	}
	return OpenExistingStore(ctx, cfg.Store, Config{FleetConfig: FleetConfig{Cluster: cfg.Cluster}, Logger: cfg.Logger})
}

// storeMisnamed says whether err, opening the store at url, means the
// store named is not one erase can work on at all, rather than one that
// is down: any DuckDB failure (the file is missing, or a collector holds
// it), a bad name, a database or cluster that is not there, a refused
// login.
func storeMisnamed(url string, err error) bool {
	if u, perr := store.ParseURL(url); perr != nil || u.Scheme == store.SchemeDuckDB {
		return true
	}
	return errors.Is(err, ErrConfig) || errors.Is(err, chstore.ErrConfig) || errors.Is(err, chstore.ErrNoDatabase) || engineRefused(err)
}

// eraseStore erases the tenant from st and writes the audit record.
func eraseStore(ctx context.Context, cfg EraseConfig, st store.Store, er *Erasure) error {
	te, ok := st.(store.TenantEraser)
	if !ok {
		return fmt.Errorf("%w (%T)", ErrNoErase, st)
	}
	e, err := te.EraseTenant(ctx, cfg.Tenant)
	if err != nil {
		return fmt.Errorf("collector: erase: %w", err)
	}
	er.Store = &e
	what, _ := json.Marshal(er)
	a := store.Audit{Time: cfg.Now().UTC(), Who: cfg.Who, Action: ActionErase, Rule: string(what)}
	if err := st.WriteAudit(ctx, []store.Audit{a}); err != nil {
		return fmt.Errorf("collector: erase: the rows are erased but the audit record was not written: %w", err)
	}
	return nil
}

// eraseWAL rewrites every minute's log in dir without the tenant's data.
func eraseWAL(dir, name string) (WALErased, error) {
	var res WALErased
	mins, err := walMinutes(dir)
	if err != nil {
		return res, err
	}
	for _, mt := range mins {
		path := walPath(dir, mt)
		var out []byte
		changed := false
		_, err := readWAL(path, func(body []byte) error {
			rep, err := reports.Decode(body)
			if err != nil {
				res.Undecodable++
				out = appendWALRecord(out, body)
				return nil
			}
			if !eraseFromReport(rep, name, &res) {
				out = appendWALRecord(out, body)
				return nil
			}
			rep.Version = 0 // encode in the current format
			b, err := rep.MarshalBinary()
			if err != nil {
				return fmt.Errorf("collector: erase: wal %s: %w", path, err)
			}
			res.Reports++
			changed = true
			out = appendWALRecord(out, b)
			return nil
		})
		if err != nil {
			return res, err
		}
		if !changed {
			continue
		}
		if err := store.WriteFileAtomic(path, out); err != nil {
			return res, fmt.Errorf("collector: erase: wal: %w", err)
		}
		res.Files++
	}
	return res, nil
}

// appendWALRecord appends body as one record of the log (wal.go).
func appendWALRecord(dst, body []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(body)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(body, crcTable))
	return append(dst, body...)
}

// eraseFromReport removes the tenant's rows, the hot keys attributed to
// it, its connection-pool waits and its quota usage from rep, and says
// whether anything went.
func eraseFromReport(rep *report.Report, name string, res *WALErased) bool {
	n := len(rep.Rows)
	rep.Rows = slices.DeleteFunc(rep.Rows, func(r report.Row) bool { return r.Tenant == name })
	rows := n - len(rep.Rows)
	drop := map[string]bool{}
	for k, t := range rep.KeyTenants {
		if t == name {
			drop[k] = true
			delete(rep.KeyTenants, k)
		}
	}
	if rep.Keys != nil && len(drop) > 0 {
		rep.Keys.Remove(func(key string) bool { return drop[key] })
	}
	other := 0
	if d, ok := report.SectionOf[report.EnforcementDetail](rep); ok {
		n := len(d.PoolWait)
		d.PoolWait = slices.DeleteFunc(slices.Clone(d.PoolWait), func(p report.PoolWait) bool { return p.Tenant == name })
		if len(d.PoolWait) != n {
			other += n - len(d.PoolWait)
			setOrDrop(rep, d, d.Empty())
		}
	}
	if us, ok := report.SectionOf[quota.Usages](rep); ok {
		n := len(us)
		us = slices.DeleteFunc(slices.Clone(us), func(u quota.Usage) bool { return u.Tenant == name })
		if len(us) != n {
			other += n - len(us)
			setOrDrop(rep, us, len(us) == 0)
		}
	}
	res.Rows += rows
	res.Keys += len(drop)
	res.Other += other
	return rows+len(drop)+other > 0
}

// setOrDrop sets s as rep's section of its tag, or drops that section
// when s has nothing left to say (sections are sent only when they do).
func setOrDrop(rep *report.Report, s report.Section, empty bool) {
	if !empty {
		rep.SetSection(s)
		return
	}
	tag := s.SectionTag()
	rep.Sections = slices.DeleteFunc(slices.Clone(rep.Sections), func(x report.Section) bool { return x.SectionTag() == tag })
}
