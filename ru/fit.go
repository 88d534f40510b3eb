package ru

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sample is one measured operation from a load test: what it was, how many
// bytes it moved, how long it took, and what it really cost the backend
// (CPU-seconds, IOPS, or any measure the deployment prices in).
type Sample struct {
	Op      Op
	Bytes   int64
	Latency time.Duration
	Cost    float64
}

// Fit is the result of FitModel: the calibrated model and how well it fits.
type Fit struct {
	// Model holds the fitted coefficients. Ops absent from the data keep
	// their value from the starting model (see Fitted).
	Model Model
	// Fitted reports which base costs were estimated from the data.
	Fitted [NumOps]bool
	// StdErr holds the standard error of each fitted coefficient, in the
	// order Base[0..NumOps-1] (0 where not fitted), PerKiB, PerMs.
	StdErr [NumOps + 2]float64
	// N is the number of samples, PerOp the count of each op.
	N     int
	PerOp [NumOps]int
	// R2 is the coefficient of determination (1 is a perfect fit), RMSE
	// the root mean squared residual in cost units, MaxAbsResidual the
	// worst single residual.
	R2, RMSE, MaxAbsResidual float64
}

// FitModel fits the coefficients of a Model to samples by ordinary least
// squares: one base cost per op present in the data, one cost per KiB and
// one per millisecond. start supplies the base cost of ops that do not
// appear. It fails with ErrFit when the data cannot determine a
// coefficient: fewer samples than unknowns plus one, or a column without
// variation (for example every sample moved the same bytes).
func FitModel(samples []Sample, start Model) (Fit, error) {
	var f Fit
	f.Model = start
	f.N = len(samples)
	for _, s := range samples {
		if int(s.Op) >= NumOps {
			return f, fmt.Errorf("%w: op %d", ErrFit, s.Op)
		}
		f.PerOp[s.Op]++
	}
	// Columns: one indicator per present op, then KiB, then ms.
	var cols []int // op index, or NumOps for KiB, NumOps+1 for ms
	for op := 0; op < NumOps; op++ {
		if f.PerOp[op] > 0 {
			cols = append(cols, op)
			f.Fitted[op] = true
		}
	}
	cols = append(cols, NumOps, NumOps+1)
	k := len(cols)
	if f.N < k+1 {
		return f, fmt.Errorf("%w: %d samples for %d unknowns (need at least %d)", ErrFit, f.N, k, k+1)
	}
	row := func(s Sample, x []float64) {
		for j, c := range cols {
			switch {
			case c < NumOps:
				if int(s.Op) == c {
					x[j] = 1
				} else {
					x[j] = 0
				}
			case c == NumOps:
				x[j] = float64(s.Bytes) / 1024
			default:
				x[j] = float64(s.Latency) / float64(time.Millisecond)
			}
		}
	}
	// Normal equations A = XᵀX, b = Xᵀy, built with scaled columns so that
	// KiB in the thousands and indicators near 1 stay well conditioned.
	x := make([]float64, k)
	scale := make([]float64, k)
	for _, s := range samples {
		row(s, x)
		for j := range x {
			scale[j] = math.Max(scale[j], math.Abs(x[j]))
		}
	}
	names := func(j int) string {
		switch c := cols[j]; {
		case c < NumOps:
			return "base " + Op(c).String()
		case c == NumOps:
			return "per_kib"
		default:
			return "per_ms"
		}
	}
	for j := range scale {
		if scale[j] == 0 {
			return f, fmt.Errorf("%w: column %s is zero in every sample", ErrFit, names(j))
		}
	}
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k)
	}
	b := make([]float64, k)
	for _, s := range samples {
		if math.IsNaN(s.Cost) || math.IsInf(s.Cost, 0) {
			return f, fmt.Errorf("%w: cost %v", ErrFit, s.Cost)
		}
		row(s, x)
		for i := range x {
			xi := x[i] / scale[i]
			b[i] += xi * s.Cost
			for j := range x {
				a[i][j] += xi * x[j] / scale[j]
			}
		}
	}
	inv, err := invert(a)
	if err != nil {
		return f, fmt.Errorf("%w: %v (a column is a combination of others, e.g. bytes or latency without variation within an op)", ErrFit, err)
	}
	beta := make([]float64, k)
	for i := range beta {
		for j := range b {
			beta[i] += inv[i][j] * b[j]
		}
		beta[i] /= scale[i]
	}
	// Residuals and fit quality.
	var mean, ssTot, ssRes float64
	for _, s := range samples {
		mean += s.Cost
	}
	mean /= float64(f.N)
	for _, s := range samples {
		row(s, x)
		var pred float64
		for j := range x {
			pred += beta[j] * x[j]
		}
		r := s.Cost - pred
		ssRes += r * r
		ssTot += (s.Cost - mean) * (s.Cost - mean)
		f.MaxAbsResidual = math.Max(f.MaxAbsResidual, math.Abs(r))
	}
	f.RMSE = math.Sqrt(ssRes / float64(f.N))
	if ssTot > 0 {
		f.R2 = 1 - ssRes/ssTot
	} else if ssRes == 0 {
		f.R2 = 1
	}
	sigma2 := ssRes / float64(f.N-k)
	for j, c := range cols {
		v := beta[j]
		se := math.Sqrt(math.Max(0, sigma2*inv[j][j])) / scale[j]
		f.StdErr[c] = se
		switch {
		case c < NumOps:
			f.Model.Base[c] = v
		case c == NumOps:
			f.Model.PerKiB = v
		default:
			f.Model.PerMs = v
		}
	}
	return f, nil
}

// invert returns the inverse of the symmetric matrix a by Gauss-Jordan
// elimination with partial pivoting, or an error when a is singular.
func invert(a [][]float64) ([][]float64, error) {
	n := len(a)
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, 2*n)
		copy(m[i], a[i])
		m[i][n+i] = 1
	}
	var maxDiag float64
	for i := range a {
		maxDiag = math.Max(maxDiag, math.Abs(a[i][i]))
	}
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		if math.Abs(m[p][c]) <= 1e-10*maxDiag {
			return nil, errors.New("singular normal equations")
		}
		m[c], m[p] = m[p], m[c]
		pv := m[c][c]
		for j := range m[c] {
			m[c][j] /= pv
		}
		for r := 0; r < n; r++ {
			if r == c || m[r][c] == 0 {
				continue
			}
			f := m[r][c]
			for j := range m[r] {
				m[r][j] -= f * m[c][j]
			}
		}
	}
	out := make([][]float64, n)
	for i := range out {
		out[i] = m[i][n:]
	}
	return out, nil
}

// MaxSamples bounds ReadSamples so that a runaway file fails clearly
// instead of exhausting memory.
const MaxSamples = 10_000_000

// ReadSamples parses a calibration CSV. The first line is a header naming
// at least the columns op, bytes, latency and cost, in any order (other
// columns are ignored; latency_ms, measured_cost and ru are accepted as
// aliases). latency is a Go duration ("12.5ms") or a plain number of
// milliseconds. Lines starting with # are comments. Any malformed line
// fails the whole read with ErrCSV and the line number, so nothing is
// silently dropped.
func ReadSamples(r io.Reader) ([]Sample, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: empty input (want a header: op,bytes,latency,cost)", ErrCSV)
		}
		return nil, fmt.Errorf("%w: header: %v", ErrCSV, err)
	}
	idx := map[string]int{"op": -1, "bytes": -1, "latency": -1, "cost": -1}
	alias := map[string]string{"op": "op", "bytes": "bytes", "latency": "latency", "latency_ms": "latency",
		"cost": "cost", "measured_cost": "cost", "ru": "cost"}
	for i, h := range head {
		name, ok := alias[strings.ToLower(strings.TrimSpace(h))]
		if !ok {
			continue
		}
		if idx[name] >= 0 {
			return nil, fmt.Errorf("%w: header names %s twice", ErrCSV, name)
		}
		idx[name] = i
	}
	for _, name := range []string{"op", "bytes", "latency", "cost"} {
		if idx[name] < 0 {
			return nil, fmt.Errorf("%w: header has no %s column (want op,bytes,latency,cost)", ErrCSV, name)
		}
	}
	var out []Sample
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCSV, err)
		}
		line, _ := cr.FieldPos(0)
		if len(out) >= MaxSamples {
			return nil, fmt.Errorf("%w: more than %d samples", ErrCSV, MaxSamples)
		}
		field := func(name string) (string, error) {
			i := idx[name]
			if i >= len(rec) {
				return "", fmt.Errorf("%w: line %d: missing %s", ErrCSV, line, name)
			}
			return strings.TrimSpace(rec[i]), nil
		}
		var s Sample
		v, err := field("op")
		if err != nil {
			return nil, err
		}
		if s.Op, err = ParseOp(v); err != nil {
			return nil, fmt.Errorf("%w: line %d: unknown op %q", ErrCSV, line, v)
		}
		if v, err = field("bytes"); err != nil {
			return nil, err
		}
		if s.Bytes, err = strconv.ParseInt(v, 10, 64); err != nil || s.Bytes < 0 {
			return nil, fmt.Errorf("%w: line %d: bytes %q (want an integer ≥ 0)", ErrCSV, line, v)
		}
		if v, err = field("latency"); err != nil {
			return nil, err
		}
		if s.Latency, err = parseLatency(v); err != nil {
			return nil, fmt.Errorf("%w: line %d: latency %q (want a duration like 12.5ms or milliseconds ≥ 0)", ErrCSV, line, v)
		}
		if v, err = field("cost"); err != nil {
			return nil, err
		}
		if s.Cost, err = strconv.ParseFloat(v, 64); err != nil || math.IsNaN(s.Cost) || math.IsInf(s.Cost, 0) || s.Cost < 0 {
			return nil, fmt.Errorf("%w: line %d: cost %q (want a finite number ≥ 0)", ErrCSV, line, v)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLatency(v string) (time.Duration, error) {
	if ms, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(ms) || ms < 0 || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			return 0, errors.New("out of range")
		}
		return time.Duration(ms * float64(time.Millisecond)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("bad duration")
	}
	return d, nil
}
