package gate

import "time"

// SetClientWatchDelay sets how long a request waits before the server
// watches for its client going away; it returns the previous delay.
func SetClientWatchDelay(d time.Duration) time.Duration {
	old := clientWatchDelay
	clientWatchDelay = d
	return old
}

// SetReadHeaderTimeout sets the servers' wait for a request's head; it
// returns the previous one.
func SetReadHeaderTimeout(d time.Duration) time.Duration {
	old := readHeaderTimeout
	readHeaderTimeout = d
	return old
}
