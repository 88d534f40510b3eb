// Package layout holds the tests of the rules the folder layout promises:
// the library packages build without cgo (an application that imports
// them links no C), and the TUI does not link the collector (nor so
// DuckDB).
package layout
