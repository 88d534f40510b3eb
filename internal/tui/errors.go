package tui

import "errors"

// Errors of the package; test with errors.Is.
var (
	// ErrUnsupported: the source cannot do this (throttling needs a
	// collector, cancelling a backend needs --postgres).
	ErrUnsupported = errors.New("tui: not supported by this source")
	// ErrUnreachable: the collector cannot be reached; the message says
	// its URL and how to start one.
	ErrUnreachable = errors.New("tui: collector unreachable")
	// ErrInput: a value typed into a prompt or given as an option is not
	// valid.
	ErrInput = errors.New("tui: invalid input")
	// ErrClosed: the source has been closed.
	ErrClosed = errors.New("tui: source closed")
)
