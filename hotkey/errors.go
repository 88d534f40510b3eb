package hotkey

import "errors"

// Errors returned by the package; test with errors.Is.
var (
	// ErrConfig reports an invalid option or argument.
	ErrConfig = errors.New("hotkey: invalid configuration")
	// ErrClosed is returned by a Get that misses the cache after Shutdown.
	ErrClosed = errors.New("hotkey: closed")
)
