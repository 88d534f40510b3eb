// Package fleetsim holds the fleet-wide quota simulation: real
// meter.Reporters with quota.Gates, in one test process, report to one or
// three real collectors (served in-process; three sum through the real
// Redis), while a load generator offers each tenant its demand and counts
// what is admitted. Each run is a testing/synctest bubble: every clock of
// it is the bubble's fake one, the events are placed so that no two fall
// at the same instant, and the outcome is exact and the same on a busy
// machine as on an idle one (TestSimulationDeterministic checks it).
//
// Its tests are the CI version (seconds); the full runs (100 processes,
// intervals of 100 ms and 1 s) run with
//
//	go test ./internal/fleetsim/ -run TestSimulation -v -timeout 30m -args -fleetsim.full
//
// and print the table of overshoot, false refusals and convergence.
package fleetsim
