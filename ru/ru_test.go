package ru

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestModelCost(t *testing.T) {
	m := DefaultModel()
	tests := []struct {
		op    Op
		bytes int64
		d     time.Duration
		want  float64
	}{
		{OpRead, 0, 0, 1},
		{OpWrite, 0, 0, 6},
		{OpRead, 8192, 0, 2},
		{OpRead, 0, 10 * time.Millisecond, 2},
		{OpScan, 1 << 20, 2 * time.Second, 2 + 128 + 200},
		{OpRead, -5, -time.Second, 1},
		{Op(99), 0, 0, 6}, // unknown op priced as a write
	}
	for _, tt := range tests {
		if got := m.Cost(tt.op, tt.bytes, tt.d); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Cost(%v, %d, %v) = %v, want %v", tt.op, tt.bytes, tt.d, got, tt.want)
		}
	}
}

func TestModelValidate(t *testing.T) {
	if err := DefaultModel().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Model{{PerKiB: -1}, {PerMs: math.NaN()}, {Base: [NumOps]float64{math.Inf(1)}}} {
		if err := m.Validate(); !errors.Is(err, ErrModel) {
			t.Errorf("Validate(%+v) = %v, want ErrModel", m, err)
		}
	}
}

func TestParseOp(t *testing.T) {
	for i := 0; i < NumOps; i++ {
		op, err := ParseOp(strings.ToUpper(Op(i).String()))
		if err != nil || op != Op(i) {
			t.Errorf("ParseOp(%v) = %v, %v", Op(i), op, err)
		}
	}
	if _, err := ParseOp("upsert"); !errors.Is(err, ErrModel) {
		t.Errorf("ParseOp(upsert) = %v", err)
	}
}

func synth(truth Model, n int, noise float64, seed uint64) []Sample {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]Sample, n)
	for i := range out {
		s := Sample{Op: Op(r.IntN(NumOps)), Bytes: int64(r.IntN(1 << 20)), Latency: time.Duration(r.IntN(200_000)) * time.Microsecond}
		s.Cost = truth.Cost(s.Op, s.Bytes, s.Latency) + noise*r.NormFloat64()
		if s.Cost < 0 {
			s.Cost = 0
		}
		out[i] = s
	}
	return out
}

func TestFitRecoversExactModel(t *testing.T) {
	truth := Model{Base: [NumOps]float64{1.5, 7, 5, 3}, PerKiB: 0.05, PerMs: 0.3}
	fit, err := FitModel(synth(truth, 500, 0, 1), DefaultModel())
	if err != nil {
		t.Fatal(err)
	}
	for i := range truth.Base {
		if math.Abs(fit.Model.Base[i]-truth.Base[i]) > 1e-6 {
			t.Errorf("base %v = %v, want %v", Op(i), fit.Model.Base[i], truth.Base[i])
		}
	}
	if math.Abs(fit.Model.PerKiB-truth.PerKiB) > 1e-9 || math.Abs(fit.Model.PerMs-truth.PerMs) > 1e-9 {
		t.Errorf("per_kib %v per_ms %v, want %v %v", fit.Model.PerKiB, fit.Model.PerMs, truth.PerKiB, truth.PerMs)
	}
	if fit.R2 < 0.999999 || fit.RMSE > 1e-6 {
		t.Errorf("R2 %v RMSE %v on exact data", fit.R2, fit.RMSE)
	}
}

func TestFitNoisy(t *testing.T) {
	truth := DefaultModel()
	fit, err := FitModel(synth(truth, 5000, 2, 2), DefaultModel())
	if err != nil {
		t.Fatal(err)
	}
	if fit.R2 < 0.95 {
		t.Errorf("R2 = %v", fit.R2)
	}
	if math.Abs(fit.RMSE-2) > 0.2 {
		t.Errorf("RMSE = %v, want ≈ 2 (the noise)", fit.RMSE)
	}
	// The truth lies within 4 standard errors of each estimate.
	if d := math.Abs(fit.Model.PerKiB - truth.PerKiB); d > 4*fit.StdErr[NumOps] {
		t.Errorf("per_kib %v ± %v, truth %v", fit.Model.PerKiB, fit.StdErr[NumOps], truth.PerKiB)
	}
	if d := math.Abs(fit.Model.Base[OpWrite] - truth.Base[OpWrite]); d > 4*fit.StdErr[OpWrite] {
		t.Errorf("write %v ± %v, truth %v", fit.Model.Base[OpWrite], fit.StdErr[OpWrite], truth.Base[OpWrite])
	}
}

func TestFitMissingOpKeepsStart(t *testing.T) {
	truth := DefaultModel()
	var s []Sample
	for _, x := range synth(truth, 400, 0, 3) {
		if x.Op != OpScan {
			s = append(s, x)
		}
	}
	start := DefaultModel()
	start.Base[OpScan] = 42
	fit, err := FitModel(s, start)
	if err != nil {
		t.Fatal(err)
	}
	if fit.Fitted[OpScan] || fit.Model.Base[OpScan] != 42 || fit.PerOp[OpScan] != 0 {
		t.Errorf("scan: fitted %v value %v", fit.Fitted[OpScan], fit.Model.Base[OpScan])
	}
}

func TestFitErrors(t *testing.T) {
	few := synth(DefaultModel(), 3, 0, 4)
	if _, err := FitModel(few, DefaultModel()); !errors.Is(err, ErrFit) {
		t.Errorf("few samples: %v", err)
	}
	noBytes := synth(DefaultModel(), 100, 0, 5)
	for i := range noBytes {
		noBytes[i].Bytes = 0
	}
	if _, err := FitModel(noBytes, DefaultModel()); !errors.Is(err, ErrFit) || !strings.Contains(err.Error(), "per_kib") {
		t.Errorf("no bytes: %v", err)
	}
	// Bytes proportional to latency: the two columns cannot be told apart.
	coll := synth(DefaultModel(), 100, 0, 6)
	for i := range coll {
		coll[i].Bytes = int64(coll[i].Latency/time.Microsecond) * 1024
	}
	if _, err := FitModel(coll, DefaultModel()); !errors.Is(err, ErrFit) {
		t.Errorf("collinear: %v", err)
	}
	bad := synth(DefaultModel(), 100, 0, 7)
	bad[3].Cost = math.NaN()
	if _, err := FitModel(bad, DefaultModel()); !errors.Is(err, ErrFit) {
		t.Errorf("NaN cost: %v", err)
	}
}

func writeCSV(s []Sample) string {
	var b bytes.Buffer
	b.WriteString("op,bytes,latency_ms,cost,note\n")
	for _, x := range s {
		fmt.Fprintf(&b, "%s,%d,%g,%g,x\n", x.Op, x.Bytes, float64(x.Latency)/1e6, x.Cost)
	}
	return b.String()
}

func TestReadSamplesRoundTrip(t *testing.T) {
	in := synth(DefaultModel(), 50, 0, 8)
	got, err := ReadSamples(strings.NewReader(writeCSV(in)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d samples, want %d", len(got), len(in))
	}
	for i := range in {
		if got[i].Op != in[i].Op || got[i].Bytes != in[i].Bytes || math.Abs(float64(got[i].Latency-in[i].Latency)) > 1 || math.Abs(got[i].Cost-in[i].Cost) > 1e-9*math.Max(1, in[i].Cost) {
			t.Fatalf("sample %d = %+v, want %+v", i, got[i], in[i])
		}
	}
}

func TestReadSamplesFormats(t *testing.T) {
	in := "# comment\nCost, Op, Latency, Bytes\n3.5, write, 12.5ms, 100\n1,read,2,0\n"
	got, err := ReadSamples(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Sample{{OpWrite, 100, 12500 * time.Microsecond, 3.5}, {OpRead, 0, 2 * time.Millisecond, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestReadSamplesErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "empty input"},
		{"no cost column", "op,bytes,latency\n", "no cost column"},
		{"duplicate column", "op,bytes,latency,cost,ru\n", "twice"},
		{"bad op", "op,bytes,latency,cost\nread,1,1,1\nfly,1,1,1\n", "line 3: unknown op"},
		{"negative bytes", "op,bytes,latency,cost\nread,-1,1,1\n", "line 2: bytes"},
		{"bad latency", "op,bytes,latency,cost\nread,1,soon,1\n", "line 2: latency"},
		{"negative latency", "op,bytes,latency,cost\nread,1,-3ms,1\n", "line 2: latency"},
		{"NaN cost", "op,bytes,latency,cost\nread,1,1,NaN\n", "line 2: cost"},
		{"short line", "op,bytes,latency,cost\nread,1\n", "line 2: missing latency"},
		{"bad quote", "op,bytes,latency,cost\n\"read,1,1,1\n", "ru: malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSamples(strings.NewReader(tt.in))
			if !errors.Is(err, ErrCSV) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrCSV containing %q", err, tt.want)
			}
		})
	}
}

func FuzzReadSamples(f *testing.F) {
	f.Add("op,bytes,latency,cost\nread,1,2ms,3\n")
	f.Add("cost,op,latency_ms,bytes\n1,scan,1.5,9\n")
	f.Add("op,bytes,latency,cost\n\"read\",1e3,1,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ReadSamples(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrCSV) {
				t.Fatalf("error without ErrCSV: %v", err)
			}
			return
		}
		for _, x := range s {
			if int(x.Op) >= NumOps || x.Bytes < 0 || x.Latency < 0 || x.Cost < 0 || math.IsNaN(x.Cost) || math.IsInf(x.Cost, 0) {
				t.Fatalf("invalid sample accepted: %+v", x)
			}
		}
		// What parsed writes back and parses to the same samples.
		again, err := ReadSamples(strings.NewReader(writeCSV(s)))
		if err != nil || len(again) != len(s) {
			t.Fatalf("round trip: %v, %d vs %d", err, len(again), len(s))
		}
	})
}
