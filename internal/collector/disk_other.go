//go:build !unix

package collector

import "errors"

// freeBytes is not known on this system: the disk reserve is not kept.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
