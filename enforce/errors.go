package enforce

import "errors"

// Errors returned by the package; test with errors.Is. Errors that reach a
// caller are wrapped with more detail behind the "enforce:" prefix.
var (
	// ErrThrottled means the tenant's RU bucket is in debt: it spent more
	// than its rate allows and must wait (see Decision.RetryAfter).
	ErrThrottled = errors.New("enforce: tenant over its RU rate")
	// ErrShed means the request's tier is being shed because latency
	// degraded (the price controller reached the shedding step).
	ErrShed = errors.New("enforce: tier shed under overload")
	// ErrQueueDelay means CoDel failed the request early because queueing
	// delay stayed above target.
	ErrQueueDelay = errors.New("enforce: queueing delay above target")
	// ErrClosed is returned by calls after Close or Shutdown.
	ErrClosed = errors.New("enforce: closed")
	// ErrConfig reports an invalid option or argument.
	ErrConfig = errors.New("enforce: invalid configuration")
	// ErrNoTenant is returned when a request carries no tenant.
	ErrNoTenant = errors.New("enforce: request has no tenant")
)
