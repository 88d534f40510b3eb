package tui

import "errors"

// Errors of the package; test with errors.Is.
var (
	// ErrUnsupported: the source cannot do this (throttling needs a
	// collector, cancelling a backend needs --postgres).
	ErrUnsupported = errors.New("tui: not supported by this source")
	// ErrUnreachable: the source (a collector, or PostgreSQL under
	// --postgres) cannot be reached; the message says which and what to
	// do.
	ErrUnreachable = errors.New("tui: unreachable")
	// ErrInput: a value typed into a prompt or given as an option is not
	// valid.
	ErrInput = errors.New("tui: invalid input")
	// ErrClosed: the source has been closed.
	ErrClosed = errors.New("tui: source closed")
)
