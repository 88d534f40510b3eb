//go:build !unix

package connlimit

// openFileLimit is not known on this system.
func openFileLimit() int { return 2 * DefaultCeiling }
