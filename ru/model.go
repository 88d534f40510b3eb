package ru

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Op is the kind of operation a unit of work performs; each has its own
// base cost in the Model.
type Op uint8

// The operations.
const (
	OpRead Op = iota
	OpWrite
	OpDelete
	OpScan
	// NumOps is the number of operations.
	NumOps = 4
)

var opNames = [NumOps]string{"read", "write", "delete", "scan"}

// String returns "read", "write", "delete" or "scan".
func (o Op) String() string {
	if int(o) < NumOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ParseOp accepts the names String returns, in any case.
func ParseOp(s string) (Op, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, n := range opNames {
		if s == n {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown op %q (want read, write, delete or scan)", ErrModel, s)
}

// Model prices one unit of work in request units (RU):
//
//	RU = Base[op] + KiB × PerKiB + ms × PerMs
//
// Base covers the fixed cost of an operation, PerKiB the bytes it moves
// and PerMs the backend time it holds. DefaultModel gives starting values;
// FitModel calibrates them from a load test.
type Model struct {
	Base   [NumOps]float64 `json:"base"`
	PerKiB float64         `json:"per_kib"`
	PerMs  float64         `json:"per_ms"`
}

// DefaultModel returns the uncalibrated defaults: read 1, write 6,
// delete 6, scan 2, 1 RU per 8 KiB and 1 RU per 10 ms.
func DefaultModel() Model {
	return Model{Base: [NumOps]float64{1, 6, 6, 2}, PerKiB: 0.125, PerMs: 0.1}
}

// Cost returns the RU of one operation that moved bytes and took d. An
// unknown op is priced as a write (the dearer guess); negative bytes and
// durations count as zero.
func (m Model) Cost(op Op, bytes int64, d time.Duration) float64 {
	if int(op) >= NumOps {
		op = OpWrite
	}
	ru := m.Base[op]
	if bytes > 0 {
		ru += float64(bytes) / 1024 * m.PerKiB
	}
	if d > 0 {
		ru += float64(d) / float64(time.Millisecond) * m.PerMs
	}
	return ru
}

// Validate checks that every coefficient is finite and not negative.
func (m Model) Validate() error {
	check := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: cost model %s = %v (want a finite number ≥ 0)", ErrModel, name, v)
		}
		return nil
	}
	for i, b := range m.Base {
		if err := check("base "+Op(i).String(), b); err != nil {
			return err
		}
	}
	if err := check("per_kib", m.PerKiB); err != nil {
		return err
	}
	return check("per_ms", m.PerMs)
}
