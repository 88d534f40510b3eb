// Package layout holds the tests of the rules the folder layout promises:
// the library packages build without cgo (an application that imports
// them links no C), the TUI does not link the collector (nor so DuckDB),
// and the code keeps its shape (no struct over 25 fields, no type with
// over 30 methods, no function over 80 lines; enforce exports at most 60
// names).
package layout
