// Package hotkey defends a backend against hot keys: a Space-Saving
// sketch finds the keys missed most, a small local cache serves them for
// a short TTL (3 s by default), and concurrent misses of one key are
// coalesced into one load, so under a storm each process sends about one
// request per hot key per TTL to the backend. Cold keys are never
// cached.
//
// Make one [Guard] per backend with [New], call [Guard.GetAt] (or
// [Guard.Get], which reads the clock) where the backend would be called,
// [Guard.Invalidate] after a write, and [Guard.Shutdown] when done.
// [NewMetrics] exports its counters to a Prometheus registerer.
package hotkey
