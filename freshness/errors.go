package freshness

import "errors"

// ErrConfig reports an invalid option or argument.
var ErrConfig = errors.New("freshness: invalid configuration")
