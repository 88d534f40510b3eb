// Package layout holds the tests of the rules the folder layout promises:
// the library packages build without cgo (an application that imports
// them links no C), the TUI does not link the collector (nor so
// DuckDB), and no test sleeps: a test waits for a condition with a
// deadline (testsvc.Eventually) or runs on fake time (testing/synctest,
// an injected clock), outside a short list of reasoned exceptions.
package layout
