// Package fleetsim holds the fleet-wide quota simulation: real
// ingest.Reporters with quota.Gates, in one test process, report over
// loopback to one or three real collectors (summing through the real
// Redis), while a load generator offers each tenant its demand and counts
// what is admitted. Its tests are the CI version (seconds); the full runs
// (100 processes, intervals of 100 ms and 1 s) run with
//
//	go test ./internal/fleetsim/ -run TestSimulation -v -timeout 30m -args -fleetsim.full
//
// and print the table of overshoot, false refusals and convergence.
package fleetsim
