//go:build !unix

package collector

// openFileLimit is not known on this system.
func openFileLimit() int { return 2 * DefaultMaxConnsCeiling }
