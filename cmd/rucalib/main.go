// Command rucalib fits the coefficients of the RU cost model (package ru),
//
//	RU = base(op) + KiB × per_kib + ms × per_ms
//
// by least squares from a load-test CSV, and prints them with their fit
// quality.
//
// Procedure:
//
//  1. Run a load test against a staging copy of the backend that mixes the
//     operations your service performs (read, write, delete, scan) over a
//     realistic spread of payload sizes and latencies. For each operation
//     record the op, the bytes it moved, its latency and its measured
//     backend cost in the unit you want to price in (for PostgreSQL, for
//     example, the buffers and WAL a statement used, or its CPU time).
//     For PostgreSQL, `rucalib pgload -dsn URL > load.csv` runs such a
//     load test of its own (see below).
//  2. Write one CSV line per operation with a header naming the columns
//     op, bytes, latency (a Go duration or plain milliseconds) and cost;
//     other columns are ignored, lines starting with # are comments.
//  3. Run `rucalib -scale 1 load.csv`. -scale divides the measured cost so
//     that one read comes out near 1 RU (use the mean cost of a small read).
//  4. Check the fit: R² close to 1 and a small RMSE relative to the mean
//     cost. Standard errors larger than a coefficient mean the load test did
//     not vary that term enough; a negative coefficient means the same.
//  5. Put the printed coefficients into enforce.WithCostModel (the -json
//     output is an ru.Model).
//
// Any malformed line fails the run with its line number: nothing is
// dropped silently.
//
// rucalib pgload runs such a load test against PostgreSQL: reads, writes,
// deletes and scans of 0–1,900-byte rows (stored inline) in a table of its
// own, which it drops afterwards. Each statement runs under EXPLAIN
// (ANALYZE, BUFFERS, WAL); its measured cost is the shared buffers it hit,
// read, dirtied and wrote plus the WAL it wrote in 8 KiB pages, its
// latency the server's execution time. Pipe its output into rucalib.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/qtop-dev/qtop/internal/buildinfo"
	"github.com/qtop-dev/qtop/ru"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: rucalib [-json] [-scale N] [file.csv]   (reads standard input without a file)
       rucalib pgload -dsn URL [-n 3000] > load.csv   (a load test against PostgreSQL)
       rucalib --version

Examples:
  # A load test of a staging PostgreSQL, then the fit (see go doc ./cmd/rucalib):
  rucalib pgload -dsn 'postgres://qtop@staging-db/app' > load.csv
  rucalib load.csv
  # The model as JSON, for collector serve --otlp-ru-model or enforce.WithCostModel:
  rucalib -json load.csv > ru.json

Flags:
`

// parse parses args into fs. --help prints the usage on stdout and ends
// the run with 0, as every qtop command's does; a bad flag, after the flag
// package's word on it, prints the usage on fs's output and ends it with
// 2; ok says to go on.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	usage := fs.Usage
	fs.Usage = func() {} // said once, below, where it belongs
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return 0, false
	}
	fs.Usage()
	return 2, false
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		buildinfo.Print(stdout, "rucalib")
		return 0
	}
	if len(args) > 0 && args[0] == "pgload" {
		return pgloadMain(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("rucalib", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the fitted model as JSON (an ru.Model)")
	scale := fs.Float64("scale", 1, "divide every measured cost by this before fitting (cost of one RU)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if !(*scale > 0) {
		fmt.Fprintln(stderr, "rucalib: -scale must be > 0")
		return 2
	}
	in := stdin
	name := "standard input"
	switch fs.NArg() {
	case 0:
	case 1:
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "rucalib: %v\n", err)
			return 1
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	default:
		fs.Usage()
		return 2
	}
	samples, err := ru.ReadSamples(in)
	if err != nil {
		fmt.Fprintf(stderr, "rucalib: %s: %v\n", name, err)
		return 1
	}
	for i := range samples {
		samples[i].Cost /= *scale
	}
	fit, err := ru.FitModel(samples, ru.DefaultModel())
	if err != nil {
		fmt.Fprintf(stderr, "rucalib: %s: %v\n", name, err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(fit.Model); err != nil {
			fmt.Fprintf(stderr, "rucalib: %v\n", err)
			return 1
		}
		return 0
	}
	printFit(stdout, fit)
	return 0
}

// printFit writes the fitted coefficients, their standard errors and the
// fit's quality as a table.
func printFit(stdout io.Writer, fit ru.Fit) {
	fmt.Fprintf(stdout, "samples %d\n", fit.N)
	fmt.Fprintf(stdout, "%-12s %12s %12s %8s\n", "coefficient", "value", "std err", "samples")
	for op := 0; op < ru.NumOps; op++ {
		o := ru.Op(op)
		if fit.Fitted[op] {
			fmt.Fprintf(stdout, "%-12s %12.4f %12.4f %8d\n", "base "+o.String(), fit.Model.Base[op], fit.StdErr[op], fit.PerOp[op])
		} else {
			fmt.Fprintf(stdout, "%-12s %12.4f %12s %8d  (default, not in data)\n", "base "+o.String(), fit.Model.Base[op], "-", 0)
		}
	}
	fmt.Fprintf(stdout, "%-12s %12.6f %12.6f\n", "per_kib", fit.Model.PerKiB, fit.StdErr[ru.NumOps])
	fmt.Fprintf(stdout, "%-12s %12.6f %12.6f\n", "per_ms", fit.Model.PerMs, fit.StdErr[ru.NumOps+1])
	fmt.Fprintf(stdout, "fit: R² %.4f, RMSE %.4f, max |residual| %.4f\n", fit.R2, fit.RMSE, fit.MaxAbsResidual)
	if err := fit.Model.Validate(); err != nil {
		fmt.Fprintf(stdout, "warning: %v: the load test did not vary that term enough\n", err)
	}
}
