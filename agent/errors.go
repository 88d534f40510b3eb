package agent

import "errors"

// Errors returned by the package; test with errors.Is.
var (
	// ErrConfig reports an invalid option.
	ErrConfig = errors.New("agent: invalid configuration")
	// ErrNoTenant means a request carries no tenant where the extractor
	// looked. The middleware answers it with 400.
	ErrNoTenant = errors.New("agent: request has no tenant")
	// ErrUnauthorized means the credential a tenant was to be read from
	// is missing, malformed, expired or not signed by the key. The
	// middleware answers it with 401.
	ErrUnauthorized = errors.New("agent: tenant credential not valid")
	// ErrClosed is returned by calls after Shutdown.
	ErrClosed = errors.New("agent: shut down")
)
