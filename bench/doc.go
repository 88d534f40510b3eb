// Package bench holds side-by-side benchmarks of qtop against peer
// libraries. It is a module of its own so that the peers never become
// dependencies of qtop itself. See README.md.
package bench
