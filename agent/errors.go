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
	// ErrAmbiguousTenant means a request names its tenant in a way two
	// readers could take differently: a tenant header sent several times
	// with different values, a path segment with an encoded "/" or that
	// is "." or "..". The middleware answers it with 400.
	ErrAmbiguousTenant = errors.New("agent: request names its tenant ambiguously")
	// ErrClosed is returned by calls after Shutdown.
	ErrClosed = errors.New("agent: shut down")
)
