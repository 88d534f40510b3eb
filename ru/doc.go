// Package ru prices work in request units (RU) by what it really costs
// the backend, and calibrates the price from a load test:
//
//	RU = base(op) + KiB × perKiB + ms × perMs
//
// [DefaultModel] starts at read 1, write 6, delete 6, scan 2, 1 RU per
// 8 KiB and 1 RU per 10 ms. [FitModel] fits the coefficients of a
// deployment by least squares from samples of a load test ([ReadSamples]
// reads them as CSV); the rucalib command wraps both, and `rucalib pgload`
// runs such a load test against PostgreSQL. What it found on the test
// machines (a write there costing about three reads, where the defaults
// say six) is in bench/README.md, and is why deployments calibrate.
//
// The enforce package charges each tenant's bucket with a Model's cost of
// the work it did.
package ru

import "errors"

// Errors returned by the package; test with errors.Is.
var (
	// ErrModel reports an invalid model coefficient or an unknown op.
	ErrModel = errors.New("ru: invalid cost model")
	// ErrCSV reports malformed calibration data.
	ErrCSV = errors.New("ru: malformed calibration data")
	// ErrFit means calibration data cannot determine the coefficients
	// (too few rows, or a column without variation).
	ErrFit = errors.New("ru: calibration data cannot be fitted")
)
