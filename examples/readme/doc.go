// Package readme holds the test that keeps the instrumentation program of
// the repository's README.md true: it extracts the program, builds it,
// runs it against a real collector and PostgreSQL, and checks with
// `qtop --once` that what the README promises arrives.
package readme
