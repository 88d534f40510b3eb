package report

import (
	"fmt"
	"strings"
)

// Kind is what a record measures.
type Kind uint8

// The kinds. The zero value is KindRequest.
const (
	// KindRequest is a request served by the process (an HTTP or RPC
	// server span).
	KindRequest Kind = iota
	// KindDB is one database statement issued by the process.
	KindDB
	// KindJob is one background job or queue task.
	KindJob
	// KindPG is a database session sampled from pg_stat_activity by the
	// collector, not recorded by a process: Valid is false for it, so no
	// report can carry it. Its rollups measure active-session seconds.
	KindPG

	// NumKinds is the number of kinds a process records (KindPG is
	// not one).
	NumKinds = 3
)

// kindNames are the names of every kind, as the stores keep them
// (store.KindRequest … store.KindPG).
var kindNames = [...]string{"request", "db", "job", "pg"}

// String returns "request", "db", "job" or "pg".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is a kind a process records (and a report
// carries): request, db or job.
func (k Kind) Valid() bool { return k < NumKinds }

// ParseKind is the inverse of Kind.String for the kinds a process
// records; it ignores case and surrounding space.
func ParseKind(s string) (Kind, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, n := range kindNames[:NumKinds] {
		if s == n {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("%w: kind %q (want request, db or job)", ErrInvalid, s)
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("%w: kind %d", ErrInvalid, uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}
