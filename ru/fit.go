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
	d, err := newDesign(samples, f.PerOp)
	if err != nil {
		return f, err
	}
	for _, c := range d.cols {
		if c < NumOps {
			f.Fitted[c] = true
		}
	}
	k := len(d.cols)
	a, b, err := d.normal(samples)
	if err != nil {
		return f, err
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
		beta[i] /= d.scale[i]
	}
	ssRes := f.quality(samples, d, beta)
	sigma2 := ssRes / float64(f.N-k)
	for j, c := range d.cols {
		v := beta[j]
		f.StdErr[c] = math.Sqrt(math.Max(0, sigma2*inv[j][j])) / d.scale[j]
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

// design is the regression's columns: one indicator per op present in the
// samples, then KiB, then ms; and each column's scale (its largest
// magnitude), so that KiB in the thousands and indicators near 1 stay
// well conditioned.
type design struct {
	cols  []int // op index, or NumOps for KiB, NumOps+1 for ms
	scale []float64
	x     []float64 // a row's scratch
}

func newDesign(samples []Sample, perOp [NumOps]int) (*design, error) {
	d := &design{}
	for op := 0; op < NumOps; op++ {
		if perOp[op] > 0 {
			d.cols = append(d.cols, op)
		}
	}
	d.cols = append(d.cols, NumOps, NumOps+1)
	k := len(d.cols)
	if len(samples) < k+1 {
		return nil, fmt.Errorf("%w: %d samples for %d unknowns (need at least %d)", ErrFit, len(samples), k, k+1)
	}
	d.x, d.scale = make([]float64, k), make([]float64, k)
	for _, s := range samples {
		for j, v := range d.row(s) {
			d.scale[j] = math.Max(d.scale[j], math.Abs(v))
		}
	}
	for j := range d.scale {
		if d.scale[j] == 0 {
			return nil, fmt.Errorf("%w: column %s is zero in every sample", ErrFit, d.name(j))
		}
	}
	return d, nil
}

// row returns sample s's row (in d's scratch, unscaled).
func (d *design) row(s Sample) []float64 {
	for j, c := range d.cols {
		switch {
		case c < NumOps:
			d.x[j] = 0
			if int(s.Op) == c {
				d.x[j] = 1
			}
		case c == NumOps:
			d.x[j] = float64(s.Bytes) / 1024
		default:
			d.x[j] = float64(s.Latency) / float64(time.Millisecond)
		}
	}
	return d.x
}

func (d *design) name(j int) string {
	switch c := d.cols[j]; {
	case c < NumOps:
		return "base " + Op(c).String()
	case c == NumOps:
		return "per_kib"
	default:
		return "per_ms"
	}
}

// normal returns the normal equations A = XᵀX, b = Xᵀy of the scaled
// columns.
func (d *design) normal(samples []Sample) (a [][]float64, b []float64, err error) {
	k := len(d.cols)
	a = make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k)
	}
	b = make([]float64, k)
	for _, s := range samples {
		if math.IsNaN(s.Cost) || math.IsInf(s.Cost, 0) {
			return nil, nil, fmt.Errorf("%w: cost %v", ErrFit, s.Cost)
		}
		x := d.row(s)
		for i := range x {
			xi := x[i] / d.scale[i]
			b[i] += xi * s.Cost
			for j := range x {
				a[i][j] += xi * x[j] / d.scale[j]
			}
		}
	}
	return a, b, nil
}

// quality sets f's residual figures for coefficients beta and returns the
// residual sum of squares.
func (f *Fit) quality(samples []Sample, d *design, beta []float64) float64 {
	var mean, ssTot, ssRes float64
	for _, s := range samples {
		mean += s.Cost
	}
	mean /= float64(f.N)
	for _, s := range samples {
		var pred float64
		for j, v := range d.row(s) {
			pred += beta[j] * v
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
	return ssRes
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
	idx, err := readHeader(cr)
	if err != nil {
		return nil, err
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
		s, err := parseSample(rec, idx, line)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// The columns of a sample, in the order idx holds them.
const (
	colOp = iota
	colBytes
	colLatency
	colCost
)

var colNames = [...]string{"op", "bytes", "latency", "cost"}

// readHeader returns the index of each column (colOp…colCost) in the
// records.
func readHeader(cr *csv.Reader) ([4]int, error) {
	idx := [4]int{-1, -1, -1, -1}
	head, err := cr.Read()
	if err != nil {
		if err == io.EOF {
			return idx, fmt.Errorf("%w: empty input (want a header: op,bytes,latency,cost)", ErrCSV)
		}
		return idx, fmt.Errorf("%w: header: %v", ErrCSV, err)
	}
	alias := map[string]int{"op": colOp, "bytes": colBytes, "latency": colLatency, "latency_ms": colLatency,
		"cost": colCost, "measured_cost": colCost, "ru": colCost}
	for i, h := range head {
		c, ok := alias[strings.ToLower(strings.TrimSpace(h))]
		if !ok {
			continue
		}
		if idx[c] >= 0 {
			return idx, fmt.Errorf("%w: header names %s twice", ErrCSV, colNames[c])
		}
		idx[c] = i
	}
	for c, i := range idx {
		if i < 0 {
			return idx, fmt.Errorf("%w: header has no %s column (want op,bytes,latency,cost)", ErrCSV, colNames[c])
		}
	}
	return idx, nil
}

// parseSample parses record rec, on line, whose columns are at idx.
func parseSample(rec []string, idx [4]int, line int) (Sample, error) {
	var v [4]string
	for c, i := range idx {
		if i >= len(rec) {
			return Sample{}, fmt.Errorf("%w: line %d: missing %s", ErrCSV, line, colNames[c])
		}
		v[c] = strings.TrimSpace(rec[i])
	}
	var s Sample
	var err error
	if s.Op, err = ParseOp(v[colOp]); err != nil {
		return s, fmt.Errorf("%w: line %d: unknown op %q", ErrCSV, line, v[colOp])
	}
	if s.Bytes, err = strconv.ParseInt(v[colBytes], 10, 64); err != nil || s.Bytes < 0 {
		return s, fmt.Errorf("%w: line %d: bytes %q (want an integer ≥ 0)", ErrCSV, line, v[colBytes])
	}
	if s.Latency, err = parseLatency(v[colLatency]); err != nil {
		return s, fmt.Errorf("%w: line %d: latency %q (want a duration like 12.5ms or milliseconds ≥ 0)", ErrCSV, line, v[colLatency])
	}
	if s.Cost, err = strconv.ParseFloat(v[colCost], 64); err != nil || math.IsNaN(s.Cost) || math.IsInf(s.Cost, 0) || s.Cost < 0 {
		return s, fmt.Errorf("%w: line %d: cost %q (want a finite number ≥ 0)", ErrCSV, line, v[colCost])
	}
	return s, nil
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
