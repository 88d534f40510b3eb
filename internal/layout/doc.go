// Package layout holds the tests of the rules the folder layout promises:
// the library packages build without cgo (an application that imports
// them links no C), the TUI does not link the collector (nor so DuckDB),
// the collector links neither the OpenTelemetry SDK nor sqlcomment (the
// report contract, and the comment format in sqlcomment/comment), the
// autopilot links inside qtop only api, incident, policy and tenant,
// the code keeps its shape (no struct over 25 fields, no type with over 30
// methods, no function over 80 lines; enforce exports at most 60 names),
// and no test sleeps: a test waits for a condition with a deadline
// (testsvc.Eventually) or runs on fake time (testing/synctest, an injected
// clock), outside a short list of reasoned exceptions.
package layout
