package fairqueue

import "errors"

// Errors returned by the package; test with errors.Is.
var (
	// ErrConfig reports an invalid option or argument.
	ErrConfig = errors.New("fairqueue: invalid configuration")
	// ErrClosed is returned by Push after Close, and by PopWait once the
	// closed queue is drained.
	ErrClosed = errors.New("fairqueue: closed")
)
