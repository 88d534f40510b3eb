package report

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Consumer takes reports: the collector, or anything in front of it. raw
// is the report's encoded body when the caller has it (a report received
// over HTTP), nil otherwise; a consumer that needs bytes (a write-ahead
// log) encodes r itself. Consume must not keep r or raw after it returns.
//
// Its error is nil (merged, or a duplicate of a merged report), a
// RetryableError (send the report again, not before its delay) or
// anything else, which is permanent: the report can never be accepted.
type Consumer interface {
	Consume(ctx context.Context, r *Report, raw []byte) (Reply, error)
}

// ConsumerFunc adapts a function to a Consumer.
type ConsumerFunc func(ctx context.Context, r *Report, raw []byte) (Reply, error)

// Consume calls f.
func (f ConsumerFunc) Consume(ctx context.Context, r *Report, raw []byte) (Reply, error) {
	return f(ctx, r, raw)
}

// RetryableError is a refusal for now: the same report may be sent again
// once Delay has passed (0: the sender's own backoff decides). Like the
// OpenTelemetry Collector's consumererror, it wraps the cause.
type RetryableError struct {
	Err   error
	Delay time.Duration
}

func (e *RetryableError) Error() string {
	if e.Delay > 0 {
		return fmt.Sprintf("%v (retry after %v)", e.Err, e.Delay)
	}
	return e.Err.Error()
}

func (e *RetryableError) Unwrap() error { return e.Err }

// NewRetryable returns err as a RetryableError with delay.
func NewRetryable(err error, delay time.Duration) error {
	return &RetryableError{Err: err, Delay: max(delay, 0)}
}

// IsRetryable reports whether err (or an error it wraps) is a
// RetryableError, and its delay.
func IsRetryable(err error) (time.Duration, bool) {
	var r *RetryableError
	if errors.As(err, &r) {
		return r.Delay, true
	}
	return 0, false
}

// PermanentError is a refusal for good: sending the same report again
// gives the same answer. Any error that is not a RetryableError is
// permanent; Permanent marks one explicitly.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }

// NewPermanent returns err as a PermanentError.
func NewPermanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err is a refusal for good: not nil and not
// a RetryableError.
func IsPermanent(err error) bool {
	_, retry := IsRetryable(err)
	return err != nil && !retry
}
