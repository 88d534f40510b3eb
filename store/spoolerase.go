package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// SpoolErased is what EraseSpooled removed from a spool folder.
type SpoolErased struct {
	Erased
	// Files is how many spool files were rewritten (or removed, when
	// nothing else was left in them).
	Files int `json:"files"`
	// Undecodable lists the files EraseSpooled could not read (corrupt
	// or quarantined ones, a dead letter whose rows do not validate): they
	// may still hold the tenant's rows, and are left for an operator.
	Undecodable []string `json:"undecodable,omitempty"`
}

// EraseSpooled removes one tenant's rows from the batches waiting in the
// spool folder dir (and from its dead-letter files): its rollups, the hot
// keys attributed to it and its statements; audit batches are kept. Each
// file is rewritten atomically (temporary file, fsync, rename), or removed
// when none of its rows is left, so a crash leaves either the old batch or
// the new one. No Spool may be open on dir meanwhile (the collector's data
// folder lock says so). A missing dir has nothing to erase.
func EraseSpooled(dir, tenant string) (SpoolErased, error) {
	var out SpoolErased
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		return out, fmt.Errorf("store: spool: erase: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir() || strings.HasSuffix(n, ".tmp"):
		case strings.HasSuffix(n, ".spool"), strings.HasSuffix(n, ".spool"+DeadLetterSuffix):
			names = append(names, n)
		case strings.HasSuffix(n, ".corrupt"):
			out.Undecodable = append(out.Undecodable, filepath.Join(dir, n))
		}
	}
	sort.Strings(names)
	for _, n := range names {
		path := filepath.Join(dir, n)
		e, changed, err := eraseSpoolFile(path, tenant)
		if errors.Is(err, ErrSpoolCorrupt) {
			out.Undecodable = append(out.Undecodable, path)
			continue
		}
		if err != nil {
			return out, err
		}
		out.Add(e)
		if changed {
			out.Files++
		}
	}
	return out, nil
}

// eraseSpoolFile rewrites one spool file without the tenant's rows.
func eraseSpoolFile(path, tenant string) (Erased, bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Erased{}, false, fmt.Errorf("store: spool: erase: %w", err)
	}
	b, err := decodeBatch(data)
	if err != nil {
		return Erased{}, false, err
	}
	var e Erased
	switch b.kind {
	case kindRollups:
		e.Rollups = deleteRows(&b.rollups, func(r Rollup) bool { return r.Tenant == tenant })
	case kindHotKeys:
		e.HotKeys = deleteRows(&b.hotKeys, func(r HotKey) bool { return r.Tenant == tenant })
	case kindStatements:
		e.Statements = deleteRows(&b.statements, func(r Statement) bool { return r.Tenant == tenant })
	}
	if e.Total() == 0 {
		return e, false, nil
	}
	if b.rows() == 0 {
		if err := os.Remove(path); err != nil {
			return e, false, fmt.Errorf("store: spool: erase: %w", err)
		}
		return e, true, nil
	}
	enc, err := encodeBatch(b)
	if err == nil {
		err = WriteFileAtomic(path, enc)
	}
	if err != nil {
		return e, false, fmt.Errorf("store: spool: erase: %s: %w", path, err)
	}
	return e, true, nil
}

// deleteRows removes the rows del matches and returns how many.
func deleteRows[T any](rows *[]T, del func(T) bool) uint64 {
	n := len(*rows)
	*rows = slices.DeleteFunc(*rows, del)
	return uint64(n - len(*rows))
}
