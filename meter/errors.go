package meter

import "errors"

// Errors of the package; test with errors.Is. The errors of a report's
// encoding are package report's.
var (
	// ErrInvalid: an option or argument is out of range.
	ErrInvalid = errors.New("meter: invalid value")
	// ErrShutdown: the reporter or span processor has been shut down.
	ErrShutdown = errors.New("meter: shut down")
)
